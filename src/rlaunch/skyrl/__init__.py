"""The RL model's user-facing names: spec, role plan, topology, runtime, executions, sources, preflight, step.

They live in the packages below: pure values (`values`), the preflight (`preflight`), planning and the
step (`plan`), the plan's views (`views`), and the models and data (`rlaunch.sources`).

Names load on first use (`rlaunch.lazy`): `from rlaunch.skyrl import check_plan` imports the
preflight and the role plan, not the artifact graph, the runner or storage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlaunch.lazy import lazy_exports

if TYPE_CHECKING:  # pragma: no cover
    from rlaunch.skyrl.plan.rl_step import SkyRLRun, skyrl_step
    from rlaunch.skyrl.preflight import check_plan
    from rlaunch.skyrl.values.execution import (
        IrisSkyRLExecution,
        LocalSkyRLExecution,
        RaySkyRLExecution,
        SkyRLExecution,
        SlurmSkyRLExecution,
    )
    from rlaunch.skyrl.values.preflight_error import PreflightError
    from rlaunch.skyrl.values.retention import SkyRLRetentionPolicy
    from rlaunch.skyrl.values.role_plan import SkyRLCriticPlan, SkyRLRolePlan, SkyRLTopology
    from rlaunch.skyrl.values.runtime import SkyRLRuntime
    from rlaunch.skyrl.values.spec import ResumeFrom, SkyRLSpec
    from rlaunch.skyrl.views.memory_fit import MemoryReport, memory_report
    from rlaunch.sources.inputs import ArtifactDataSource, ArtifactHfModel, FromBase, FromConfig, HfModel, PromptData
    from rlaunch.sources.model_facts import ModelFacts

__all__ = [
    "ArtifactDataSource",
    "ArtifactHfModel",
    "FromBase",
    "FromConfig",
    "HfModel",
    "IrisSkyRLExecution",
    "LocalSkyRLExecution",
    "MemoryReport",
    "ModelFacts",
    "PreflightError",
    "PromptData",
    "RaySkyRLExecution",
    "ResumeFrom",
    "SlurmSkyRLExecution",
    "SkyRLExecution",
    "SkyRLCriticPlan",
    "SkyRLRetentionPolicy",
    "SkyRLRolePlan",
    "SkyRLRun",
    "SkyRLRuntime",
    "SkyRLSpec",
    "SkyRLTopology",
    "check_plan",
    "memory_report",
    "skyrl_step",
]

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "values.preflight_error": ["PreflightError"],
        "values.execution": [
            "IrisSkyRLExecution",
            "LocalSkyRLExecution",
            "RaySkyRLExecution",
            "SkyRLExecution",
            "SlurmSkyRLExecution",
        ],
        "views.memory_fit": ["MemoryReport", "memory_report"],
        "rlaunch.sources.model_facts": ["ModelFacts"],
        "preflight": ["check_plan"],
        "values.retention": ["SkyRLRetentionPolicy"],
        "values.role_plan": ["SkyRLCriticPlan", "SkyRLRolePlan", "SkyRLTopology"],
        "values.runtime": ["SkyRLRuntime"],
        "rlaunch.sources.inputs": [
            "ArtifactDataSource",
            "ArtifactHfModel",
            "FromBase",
            "FromConfig",
            "HfModel",
            "PromptData",
        ],
        "values.spec": ["ResumeFrom", "SkyRLSpec"],
        "plan.rl_step": ["SkyRLRun", "skyrl_step"],
    },
)
