"""The RL configuration model: spec, role plan, topology, runtime, executions, preflight, step.

Names load on first use (`rlaunch.lazy`): `from rlaunch.skyrl import check_plan` imports the
preflight and the role plan, not the artifact graph, the runner or storage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlaunch.lazy import lazy_exports

if TYPE_CHECKING:  # pragma: no cover
    from rlaunch.skyrl.execution import (
        IrisSkyRLExecution,
        LocalSkyRLExecution,
        RaySkyRLExecution,
        SkyRLExecution,
        SlurmSkyRLExecution,
    )
    from rlaunch.skyrl.memory_fit import MemoryReport, memory_report
    from rlaunch.skyrl.model_facts import ModelFacts
    from rlaunch.skyrl.preflight import check_plan
    from rlaunch.skyrl.preflight_error import PreflightError
    from rlaunch.skyrl.retention import SkyRLRetentionPolicy
    from rlaunch.skyrl.rl_step import SkyRLRun, skyrl_step
    from rlaunch.skyrl.role_plan import SkyRLCriticPlan, SkyRLRolePlan, SkyRLTopology
    from rlaunch.skyrl.runtime import SkyRLRuntime
    from rlaunch.skyrl.sources import ArtifactDataSource, ArtifactHfModel, HfModel, PromptData
    from rlaunch.skyrl.spec import ResumeFrom, SkyRLSpec

__all__ = [
    "ArtifactDataSource",
    "ArtifactHfModel",
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
        "preflight_error": ["PreflightError"],
        "execution": [
            "IrisSkyRLExecution",
            "LocalSkyRLExecution",
            "RaySkyRLExecution",
            "SkyRLExecution",
            "SlurmSkyRLExecution",
        ],
        "memory_fit": ["MemoryReport", "memory_report"],
        "model_facts": ["ModelFacts"],
        "preflight": ["check_plan"],
        "retention": ["SkyRLRetentionPolicy"],
        "role_plan": ["SkyRLCriticPlan", "SkyRLRolePlan", "SkyRLTopology"],
        "runtime": ["SkyRLRuntime"],
        "sources": ["ArtifactDataSource", "ArtifactHfModel", "HfModel", "PromptData"],
        "spec": ["ResumeFrom", "SkyRLSpec"],
        "rl_step": ["SkyRLRun", "skyrl_step"],
    },
)
