"""Executions: where and how a SkyRL step runs. Placement only, never part of identity.

Cluster and route, host CPU/memory/disk per node, priority, retries, the coordinator's deadline
and resources, the child job's timeout, the W&B entity, the task environment (`task_env`,
`env_passthrough`: see `rlaunch.launch_config.task_env`), and how a Ray-driver runtime's gang
bootstraps Ray (`ray`: port, spill dir, timeouts; the document's `ray` section). Moving a run to
another cluster or resizing its hosts keeps its fingerprint; a test proves it.
"""

from __future__ import annotations

import abc
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from rlaunch.field_checks import require_int, require_number, require_str
from rlaunch.launch_config.schema import RaySection
from rlaunch.launch_config.task_env import check_task_env
from rlaunch.placement import RayClusterFields, RayPlacement, SlurmPlacement, SlurmQueueFields
from rlaunch.units import parse_size

# What a large launch must not leave to a default without saying so (readiness marks each).
LAUNCH_FIELDS = (
    "cpu",
    "memory",
    "disk",
    "coordinator_cpu",
    "coordinator_memory",
    "coordinator_disk",
    "coordinator_timeout_hours",
    "job_timeout_seconds",
    "max_retries",
)


@dataclass(frozen=True, kw_only=True)
class SkyRLExecution(abc.ABC):
    """Fields every execution shares; subclasses add their cluster's route."""

    backend: ClassVar[str]
    cpu: float
    memory: str
    disk: str
    priority: str | None = None
    max_retries: int = 0
    coordinator_timeout_hours: float = 24.0
    job_timeout_seconds: int = 0
    wandb_entity: str | None = None
    coordinator_cpu: float = 4.0
    coordinator_memory: str = "16GB"
    coordinator_disk: str = "64GB"
    ray: RaySection = field(default_factory=RaySection)
    task_env: Mapping[str, str] = field(default_factory=dict)  # fixed variables for every task and trainer
    env_passthrough: tuple[str, ...] = ()  # names / PREFIX* patterns (NCCL_*) copied from the submitting environment
    smoke_gate_nodes: int = 1  # a launch on more nodes must declare a smoke
    smoke_gate_gpus: int = 8  # a launch on more GPUs, whatever the accelerator, must declare a smoke

    def __new__(cls, *args: Any, **kwargs: Any) -> SkyRLExecution:
        # Readiness marks what the experiment stated apart from the defaults it relies on.
        execution = super().__new__(cls)
        object.__setattr__(execution, "_stated", frozenset(kwargs))
        return execution

    def stated(self, name: str) -> bool:
        """Whether the experiment gave `name` (else the field's default is used)."""
        return name in getattr(self, "_stated", frozenset())

    def defaults(self) -> tuple[str, ...]:
        """The launch settings left to their defaults (the document's `cluster.defaults`)."""
        return tuple(name for name in LAUNCH_FIELDS if not self.stated(name))

    def __post_init__(self) -> None:
        owner = type(self).__name__
        task_env, passthrough = check_task_env(owner, self.task_env, self.env_passthrough)
        object.__setattr__(self, "task_env", MappingProxyType(task_env))
        object.__setattr__(self, "env_passthrough", passthrough)
        if not isinstance(self.ray, RaySection):
            raise TypeError(f"{owner}.ray must be a RaySection (port, spill_dir, timeouts), got {self.ray!r}")
        for name in ("cpu", "coordinator_cpu", "coordinator_timeout_hours"):
            require_number(owner, name, getattr(self, name))
            if getattr(self, name) <= 0:
                raise ValueError(f"{owner}.{name}={getattr(self, name)} must be positive")
        for name in ("memory", "disk", "coordinator_memory", "coordinator_disk"):
            parse_size(getattr(self, name), field=f"{owner}.{name}")
        require_int(owner, "max_retries", self.max_retries)
        require_int(owner, "job_timeout_seconds", self.job_timeout_seconds)
        for name in ("smoke_gate_nodes", "smoke_gate_gpus"):
            require_int(owner, name, getattr(self, name))
            if getattr(self, name) < 0:
                raise ValueError(f"{owner}.{name}={getattr(self, name)} cannot be negative")
        if self.max_retries < 0:
            raise ValueError(f"{owner}.max_retries={self.max_retries} cannot be negative")
        if self.job_timeout_seconds < 0:
            raise ValueError(f"{owner}.job_timeout_seconds={self.job_timeout_seconds} cannot be negative (0 = none)")
        require_str(owner, "priority", self.priority, allow_none=True)
        require_str(owner, "wandb_entity", self.wandb_entity, allow_none=True)

    @abc.abstractmethod
    def route(self) -> tuple[Any, ...]:
        """What must be the same for every SkyRL step of one main (one coordinator submits them all)."""

    @abc.abstractmethod
    def placement(self) -> Mapping[str, Any]:
        """The cluster backend's constructor arguments, written into `cluster.placement`."""


@dataclass(frozen=True, kw_only=True)
class LocalSkyRLExecution(SkyRLExecution):
    """Processes on this machine through the embedded local backend (sized for a laptop)."""

    backend: ClassVar[str] = "local"
    cpu: float = 1.0
    memory: str = "4GB"
    disk: str = "10GB"
    coordinator_timeout_hours: float = 2.0
    coordinator_cpu: float = 1.0
    coordinator_memory: str = "2GB"
    coordinator_disk: str = "10GB"
    jobs_root: str | None = None

    def route(self) -> tuple[Any, ...]:
        return ("local", self.jobs_root)

    def placement(self) -> Mapping[str, Any]:
        return {"root": self.jobs_root} if self.jobs_root else {}


@dataclass(frozen=True, kw_only=True)
class RaySkyRLExecution(SkyRLExecution, RayClusterFields):
    """An existing Ray cluster through the Ray Jobs API (needs the extra: pip install 'rlaunch[ray]').

    address        the dashboard URL (http://<head>:8265) or the GCS address (<head>:6379); default
                   $RAY_ADDRESS (inside an rlaunch job: $RLAUNCH_RAY_ADDRESS, which the backend sets)
    working_dir    uploaded once as the jobs' working directory (None: upload nothing, the cluster
                   already has the code); `excludes` are gitignore-style patterns left out
    py_executable  the interpreter rlaunch runs with on the cluster (None: this one's path when the
                   cluster shares the image, or "python" from the job's PATH when `pip` is set); it
                   needs `rlaunch[ray]` and the same ray version
    pip            packages Ray installs into a per-job virtualenv (e.g. ("rlaunch[ray]==0.1.0",))
    strategy       placement of the child gang: auto (STRICT_SPREAD when the cluster has a node per
                   replica, else PACK), or PACK, SPREAD, STRICT_SPREAD, STRICT_PACK
    check_capacity refuse a plan the cluster could never fit (turn off for an autoscaling cluster)

    `cpu`/`memory`/`disk` are per node of the child gang, `coordinator_*` the coordinator job's
    entrypoint resources. Ray has no priorities: `priority` is recorded on the jobs, nothing more.
    Ray has no disk resource: disk sizes are not enforced.
    """

    backend: ClassVar[str] = "ray"
    # An experiment uploads its project unless told otherwise (a Ray backend built by hand uploads nothing).
    working_dir: str | None = "."
    excludes: tuple[str, ...] = (".git", ".venv", "rlaunch-artifacts", "__pycache__", "*.png")

    def __post_init__(self) -> None:
        super().__post_init__()
        checked = self._placement(self.address)
        object.__setattr__(self, "excludes", checked.excludes)
        object.__setattr__(self, "pip", checked.pip)

    def _placement(self, address: str | None) -> RayPlacement:
        return RayPlacement(
            **{**self.cluster_fields(), "address": address}, priority=self.priority, owner="RaySkyRLExecution"
        )

    def _address(self) -> str | None:
        return self.address or os.environ.get("RAY_ADDRESS") or os.environ.get("RLAUNCH_RAY_ADDRESS")

    def resolved_address(self) -> str:
        address = self._address()
        if not address:
            raise ValueError("RaySkyRLExecution needs address=... or $RAY_ADDRESS (e.g. http://127.0.0.1:8265)")
        return address

    def route(self) -> tuple[Any, ...]:
        return ("ray", self._address())

    def placement(self) -> Mapping[str, Any]:
        return self._placement(self.resolved_address()).options()


@dataclass(frozen=True, kw_only=True)
class IrisSkyRLExecution(SkyRLExecution):
    """Marin's Iris (needs Python >= 3.12 and the extra: pip install 'rlaunch[iris]').

    cluster_config   the cluster YAML (`iris --config`): where the controller is (a local cluster
                     started with `iris --config X cluster start --local` is found through the
                     address it recorded) and the scale groups a gang is checked against
    controller_url   the controller itself (http://host:port); with cluster_config, it is where
                     that cluster answers. One of the two is required.
    cluster          the cluster's name (for people; Iris names it in the config)
    target_cluster / parent_cluster_config   a federated hand-off (recorded; not submitted through)
    scheduling_timeout_seconds   how long a job may wait unplaced before Iris fails it (unschedulable)

    `cpu`/`memory`/`disk` are per node of the child gang (each node is one Iris task of
    `gpus_per_node` x `gpu_variant`), `coordinator_*` the coordinator job's; `priority` is the Iris
    priority band (production, interactive, batch, system; None inherits); `max_retries` sets both
    Iris retry limits (per task and the job's cumulative failures).
    """

    backend: ClassVar[str] = "iris"
    cluster: str | None = None
    cluster_config: str | None = None
    controller_url: str | None = None
    target_cluster: str | None = None
    parent_cluster_config: str | None = None
    scheduling_timeout_seconds: int = 600

    def __post_init__(self) -> None:
        super().__post_init__()
        from rlaunch.cluster.iris import PRIORITIES

        owner = "IrisSkyRLExecution"
        for name in ("cluster", "cluster_config", "controller_url", "target_cluster", "parent_cluster_config"):
            require_str(owner, name, getattr(self, name), allow_none=True)
        if self.cluster_config is None and self.controller_url is None:
            raise TypeError(
                f"{owner} needs cluster_config='<cluster.yaml>' or controller_url='http://<controller>:<port>'"
            )
        if self.controller_url is not None and not self.controller_url.startswith(("http://", "https://")):
            raise ValueError(f"{owner}.controller_url={self.controller_url!r} must be an http(s):// URL")
        if (self.target_cluster is None) != (self.parent_cluster_config is None):
            raise ValueError(f"{owner}.target_cluster and parent_cluster_config must be set together")
        if self.target_cluster is not None and self.target_cluster != self.cluster:
            raise ValueError(f"{owner}.target_cluster={self.target_cluster!r} must equal cluster={self.cluster!r}")
        if self.priority is not None and self.priority not in PRIORITIES:
            raise ValueError(f"{owner}.priority={self.priority!r}: choose one of {list(PRIORITIES)} (None inherits)")
        require_int(owner, "scheduling_timeout_seconds", self.scheduling_timeout_seconds)
        if self.scheduling_timeout_seconds <= 0:
            raise ValueError(f"{owner}.scheduling_timeout_seconds={self.scheduling_timeout_seconds} must be positive")

    def route(self) -> tuple[Any, ...]:
        return ("iris", self.parent_cluster_config or self.cluster_config or self.controller_url, self.target_cluster)

    def placement(self) -> Mapping[str, Any]:
        return {
            "cluster": self.cluster,
            "cluster_config": self.cluster_config,
            "controller_url": self.controller_url,
            "target_cluster": self.target_cluster,
            "parent_cluster_config": self.parent_cluster_config,
            "priority": self.priority,
            "scheduling_timeout_seconds": self.scheduling_timeout_seconds,
        }


@dataclass(frozen=True, kw_only=True)
class SlurmSkyRLExecution(SkyRLExecution, SlurmQueueFields):
    """A Slurm cluster through sbatch/srun/squeue/scancel (run where Slurm's commands are: a login node).

    partition / account / qos   as sbatch takes them (None: the cluster's default)
    time_limit_minutes the Slurm time limit of every job (None: the partition's default)
    constraint         node features (sbatch --constraint, e.g. "a100&ib")
    gpu_gres           the generic resource GPUs are requested as: `gpu`, or `gpu:<type>`; the count
                       per node is the topology's gpus_per_node
    exclusive          whole nodes for each job
    sbatch_options     extra options by name (`rlaunch.placement.SBATCH_EXTRAS`: reservation,
                       mail-type, comment, ...), validated; never free-form script text
    jobs_root          rlaunch's job state directory, on a filesystem every node sees (default
                       $RLAUNCH_SLURM_ROOT, else <prefix>/.slurm-jobs)

    `cpu`/`memory` are per node of the child gang (`--cpus-per-task`, `--mem`), `coordinator_*`
    the coordinator job's; `priority` is recorded only (Slurm orders by its own priority and QOS);
    disk is not requested (Slurm's `--tmp` is an extra option). Before anything is queued, the
    gang is checked against the partition (`rlaunch.cluster.slurm.queue_check`).
    """

    backend: ClassVar[str] = "slurm"
    jobs_root: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "sbatch_options", self._placement().sbatch_options)

    def _placement(self) -> SlurmPlacement:
        return SlurmPlacement(**self.queue_fields(), root=self.jobs_root, owner="SlurmSkyRLExecution")

    def route(self) -> tuple[Any, ...]:
        """Every field: the coordinator's children queue with the coordinator's placement."""
        options = self._placement().options()
        return ("slurm", *((k, json.dumps(v, sort_keys=True)) for k, v in sorted(options.items())))

    def placement(self) -> Mapping[str, Any]:
        return self._placement().options()
