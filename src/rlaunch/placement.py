"""Where a cluster backend puts jobs, as plain values validated once (no dependency: ground floor).

A transport's fields are declared once (`RayClusterFields`, `SlurmQueueFields`): the placement and
the execution (`RaySkyRLExecution`, `SlurmSkyRLExecution`) both inherit them. An execution builds a
`RayPlacement` or `SlurmPlacement` from its fields and writes `options()` into the launch document's
`cluster.placement`; the backend builds the same type from its constructor arguments. So a plan and
the backend refuse the same mistakes, in the same words, and neither imports the other.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

RAY_STRATEGIES = ("auto", "PACK", "SPREAD", "STRICT_SPREAD", "STRICT_PACK")


def _strings(owner: str, name: str, value: Any) -> tuple[str, ...]:
    if (
        isinstance(value, str)
        or not isinstance(value, (tuple, list))
        or not all(isinstance(v, str) and v for v in value)
    ):
        raise TypeError(f"{owner}.{name} must be a tuple of strings, got {value!r}")
    return tuple(value)


@dataclass(frozen=True, kw_only=True)
class RayClusterFields:
    """How rlaunch's jobs use a Ray cluster, declared once: `RayPlacement` validates these fields and
    `RaySkyRLExecution` takes them (see it for each field).

    address        dashboard URL (http://<head>:8265) or GCS address (<head>:6379); None: from the environment
    working_dir    uploaded once as the jobs' working directory (None: the cluster has the code)
    excludes       gitignore-style patterns left out of the upload
    py_executable  the interpreter on the cluster; pip: packages Ray installs per job
    strategy       placement of a multi-replica gang (auto: STRICT_SPREAD when there is a node per replica)
    check_capacity refuse a job the cluster could never fit
    """

    address: str | None = None
    working_dir: str | None = None
    excludes: tuple[str, ...] = ()
    py_executable: str | None = None
    pip: tuple[str, ...] = ()
    strategy: str = "auto"
    check_capacity: bool = True

    def cluster_fields(self) -> dict[str, Any]:
        """These fields by name, as they are (what an execution hands its placement)."""
        return {f.name: getattr(self, f.name) for f in fields(RayClusterFields)}


@dataclass(frozen=True, kw_only=True)
class RayPlacement(RayClusterFields):
    """A Ray cluster and how rlaunch's jobs use it; priority: recorded on the jobs."""

    priority: str | None = None
    owner: str = field(default="RayPlacement", compare=False, repr=False)  # who errors name

    def __post_init__(self) -> None:
        owner = self.owner
        for name in ("address", "working_dir", "py_executable", "priority"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise TypeError(f"{owner}.{name} must be a non-empty string or None, got {value!r}")
        object.__setattr__(self, "excludes", _strings(owner, "excludes", self.excludes))
        object.__setattr__(self, "pip", _strings(owner, "pip", self.pip))
        if self.address is not None and self.address.startswith("ray://"):
            raise ValueError(
                f"{owner}.address={self.address!r} is a Ray Client address; rlaunch uses the Jobs API: give the "
                "dashboard URL (http://<head>:8265) or the GCS address (<head>:6379)"
            )
        if self.strategy not in RAY_STRATEGIES:
            raise ValueError(f"{owner}.strategy={self.strategy!r}: choose one of {list(RAY_STRATEGIES)}")
        if not isinstance(self.check_capacity, bool):
            raise TypeError(f"{owner}.check_capacity must be true or false, got {self.check_capacity!r}")

    def options(self) -> dict[str, Any]:
        """The Ray backend's constructor arguments (the launch document's `cluster.placement`)."""
        return {
            "address": self.address,
            "working_dir": self.working_dir,
            "excludes": list(self.excludes),
            "py_executable": self.py_executable,
            "pip": list(self.pip),
            "strategy": self.strategy,
            "check_capacity": self.check_capacity,
            "priority": self.priority,
        }


# Extra `#SBATCH` options a Slurm execution may set by name; rlaunch writes the rest itself.
SBATCH_EXTRAS = (
    "begin", "comment", "distribution", "hint", "licenses", "mail-type", "mail-user", "network", "nice",
    "reservation", "signal", "switches", "tmp", "wckey",
)  # fmt: skip
# Options rlaunch owns: the field that sets each (None: rlaunch derives it from the job).
SBATCH_OWNED = {
    "partition": "partition", "account": "account", "qos": "qos", "time": "time_limit_minutes",
    "constraint": "constraint", "exclusive": "exclusive", "gres": "gpu_gres (the count is the topology's gpus_per_node)",
    "cpus-per-task": "cpu", "mem": "memory", "nodes": None, "ntasks": None, "ntasks-per-node": None,
    "job-name": None, "output": None, "error": None, "export": None, "chdir": None, "hold": None,
    "requeue": None, "no-requeue": None, "wrap": None, "array": None, "dependency": None,
}  # fmt: skip
_SLURM_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
_GRES = re.compile(r"^[A-Za-z0-9_]+(:[A-Za-z0-9_.-]+)?$")
_CONSTRAINT = re.compile(r"^[A-Za-z0-9_.&|!()\[\]*,:-]+$")


@dataclass(frozen=True, kw_only=True)
class SlurmQueueFields:
    """How rlaunch's jobs ask a Slurm queue, declared once: `SlurmPlacement` validates these fields and
    `SlurmSkyRLExecution` takes them (see it for each field).

    partition / account / qos   as sbatch takes them (None: the cluster's default)
    time_limit_minutes the jobs' Slurm time limit (None: the partition's default)
    constraint         node features (sbatch --constraint)
    gpu_gres           the generic resource GPUs are requested as (`gpu` or `gpu:<type>`)
    exclusive          whole nodes for each job
    sbatch_options     extra options by name (from `SBATCH_EXTRAS`), never free-form script text
    """

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_limit_minutes: int | None = None
    constraint: str | None = None
    gpu_gres: str = "gpu"
    exclusive: bool = False
    sbatch_options: Mapping[str, str] = field(default_factory=dict)

    def queue_fields(self) -> dict[str, Any]:
        """These fields by name, as they are (what an execution hands its placement)."""
        return {f.name: getattr(self, f.name) for f in fields(SlurmQueueFields)}


@dataclass(frozen=True, kw_only=True)
class SlurmPlacement(SlurmQueueFields):
    """A Slurm cluster's queue and how rlaunch's jobs ask for it; root: the jobs' state directory, on a
    filesystem every node sees (None: the default)."""

    root: str | None = None
    owner: str = field(default="SlurmPlacement", compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = self.owner
        for name in ("root", "partition", "account", "qos", "constraint", "gpu_gres"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise TypeError(f"{owner}.{name} must be a non-empty string or None, got {value!r}")
        for name in ("partition", "account", "qos"):
            value = getattr(self, name)
            if value is not None and not _SLURM_NAME.match(value):
                raise ValueError(f"{owner}.{name}={value!r} is not a Slurm name (letters, digits, '_', '.', '-')")
        if not _GRES.match(self.gpu_gres):
            raise ValueError(
                f"{owner}.gpu_gres={self.gpu_gres!r} must be a gres name, optionally with a type: gpu, gpu:a100"
            )
        if self.constraint is not None and not _CONSTRAINT.match(self.constraint):
            raise ValueError(
                f"{owner}.constraint={self.constraint!r} is not a Slurm feature expression (features joined by & | , "
                "with [] () ! *; no spaces)"
            )
        limit = self.time_limit_minutes
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0):
            raise ValueError(f"{owner}.time_limit_minutes={limit!r} must be a positive number of minutes (or None)")
        if not isinstance(self.exclusive, bool):
            raise TypeError(f"{owner}.exclusive must be true or false, got {self.exclusive!r}")
        if not isinstance(self.sbatch_options, Mapping):
            raise TypeError(
                f"{owner}.sbatch_options must be a mapping of option name to value, got {self.sbatch_options!r}"
            )
        for name, value in self.sbatch_options.items():
            key = name.removeprefix("--") if isinstance(name, str) else name
            if key in SBATCH_OWNED:
                set_by = SBATCH_OWNED[key]
                fix = f"set {owner}.{set_by} instead" if set_by else "rlaunch sets it from the job"
                raise ValueError(f"{owner}.sbatch_options[{name!r}]: --{key} is rlaunch's to write; {fix}")
            if key not in SBATCH_EXTRAS:
                raise ValueError(
                    f"{owner}.sbatch_options[{name!r}]: not an option rlaunch passes; choose from {list(SBATCH_EXTRAS)}"
                )
            if not isinstance(value, str) or not value.strip() or any(c in value for c in "\n\r\0"):
                raise ValueError(f"{owner}.sbatch_options[{name!r}]={value!r} must be a one-line non-empty string")
        object.__setattr__(
            self, "sbatch_options", MappingProxyType({k.removeprefix("--"): v for k, v in self.sbatch_options.items()})
        )

    def sbatch_args(self) -> list[str]:
        """The sbatch options this placement sets (the job's own size is the backend's to add)."""
        args = [f"--{name}={value}" for name, value in (
            ("partition", self.partition), ("account", self.account), ("qos", self.qos),
            ("time", self.time_limit_minutes), ("constraint", self.constraint),
        ) if value is not None]  # fmt: skip
        if self.exclusive:
            args.append("--exclusive")
        return args + [f"--{name}={value}" for name, value in sorted(self.sbatch_options.items())]

    def options(self) -> dict[str, Any]:
        """The Slurm backend's constructor arguments (the launch document's `cluster.placement`)."""
        return {
            "root": self.root,
            "partition": self.partition,
            "account": self.account,
            "qos": self.qos,
            "time_limit_minutes": self.time_limit_minutes,
            "constraint": self.constraint,
            "gpu_gres": self.gpu_gres,
            "exclusive": self.exclusive,
            "sbatch_options": dict(self.sbatch_options),
        }
