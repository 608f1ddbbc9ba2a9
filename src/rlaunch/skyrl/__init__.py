"""The RL configuration model: spec, role plan, topology, runtime, executions, preflight, step."""

from rlaunch.skyrl.errors import PreflightError
from rlaunch.skyrl.execution import IrisSkyRLExecution, LocalSkyRLExecution, RaySkyRLExecution, SkyRLExecution
from rlaunch.skyrl.preflight import check_plan
from rlaunch.skyrl.retention import SkyRLRetentionPolicy
from rlaunch.skyrl.role_plan import SkyRLRolePlan, SkyRLTopology
from rlaunch.skyrl.runtime import SkyRLRuntime
from rlaunch.skyrl.sources import ArtifactDataSource, ArtifactHfModel, HfModel, ModelFacts
from rlaunch.skyrl.spec import SkyRLSpec
from rlaunch.skyrl.step import SkyRLRun, skyrl_step

__all__ = [
    "ArtifactDataSource",
    "ArtifactHfModel",
    "HfModel",
    "IrisSkyRLExecution",
    "LocalSkyRLExecution",
    "ModelFacts",
    "PreflightError",
    "RaySkyRLExecution",
    "SkyRLExecution",
    "SkyRLRetentionPolicy",
    "SkyRLRolePlan",
    "SkyRLRun",
    "SkyRLRuntime",
    "SkyRLSpec",
    "SkyRLTopology",
    "check_plan",
    "skyrl_step",
]
