"""The one protocol every cluster backend implements, and the job spec it takes.

A job is a gang of `replicas` identical processes (all start together or none), each started
from an argv list (never a shell string) with an explicit environment. A job submitted from
inside a running job is its child: cancelling the parent cancels the children.

Every replica sees:
  RLAUNCH_JOB_ID       the job's id               RLAUNCH_BACKEND        the backend name
  RLAUNCH_REPLICA_RANK 0..replicas-1              RLAUNCH_WORLD_SIZE     replicas
  RLAUNCH_RENDEZVOUS   host:port of rank 0's rendezvous (free for the gang to use)
plus whatever the backend needs to rebuild itself inside the job (see `backend_from_env`).
"""

from __future__ import annotations

import enum
import importlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from rlaunch.errors import UserError
from rlaunch.names import MAX_LABEL, check_name, job_name

JOB_ID_ENV = "RLAUNCH_JOB_ID"
BACKEND_ENV = "RLAUNCH_BACKEND"
RANK_ENV = "RLAUNCH_REPLICA_RANK"
WORLD_SIZE_ENV = "RLAUNCH_WORLD_SIZE"
RENDEZVOUS_ENV = "RLAUNCH_RENDEZVOUS"
# Set by a backend that knows better than the bootstrap's guess (rlaunch.task.ray_cluster):
NODE_IP_ENV = "RLAUNCH_NODE_IP"  # this replica's own address
RAY_PORT_ENV = "RLAUNCH_RAY_PORT"  # a port reserved for this replica's Ray head (else: ray.port)

_BACKENDS = {
    "local": "rlaunch.cluster.local.backend:LocalBackend",
    "ray": "rlaunch.cluster.ray.backend:RayBackend",
    "iris": "rlaunch.cluster.iris.backend:IrisBackend",
    "slurm": "rlaunch.cluster.slurm.backend:SlurmBackend",
}


@dataclass(frozen=True)
class Resources:
    """Per-replica resources. `accelerators` counts devices of `accelerator_type` on one replica."""

    cpu: float = 1.0
    memory_bytes: int | None = None
    disk_bytes: int | None = None
    accelerators: int = 0
    accelerator_type: str | None = None

    def __post_init__(self) -> None:
        if self.cpu <= 0:
            raise ValueError(f"resources.cpu={self.cpu} must be positive")
        if self.accelerators < 0:
            raise ValueError(f"resources.accelerators={self.accelerators} cannot be negative")


@dataclass(frozen=True)
class JobSpec:
    """What a backend is asked to run. Every backend is handed one, so its name and labels obey the
    name rule (`rlaunch.names`) here, once for all of them: a name with whitespace, a control
    character or a `/` is refused at construction, naming the field, before any backend sees it."""

    name: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    working_dir: str | None = None
    resources: Resources = field(default_factory=Resources)
    replicas: int = 1
    timeout_seconds: float | None = None
    max_retries: int = 0
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", job_name(self.name, field="JobSpec.name"))
        for key, value in self.labels.items():
            check_name(key, field="JobSpec.labels key", max_length=MAX_LABEL)
            check_name(value, field=f"JobSpec.labels[{key!r}]", max_length=MAX_LABEL, segments=True)
        if isinstance(self.argv, str) or not self.argv or not all(isinstance(a, str) for a in self.argv):
            raise TypeError(
                f"JobSpec.argv must be a non-empty list of strings (never a shell string); got {self.argv!r}"
            )
        object.__setattr__(self, "argv", tuple(self.argv))
        bad_env = [k for k, v in self.env.items() if not isinstance(k, str) or not isinstance(v, str)]
        if bad_env:
            raise TypeError(f"JobSpec.env values must be strings; fix {bad_env}")
        if self.replicas < 1:
            raise ValueError(f"JobSpec.replicas={self.replicas} must be at least 1")
        if self.max_retries < 0:
            raise ValueError(f"JobSpec.max_retries={self.max_retries} cannot be negative")
        if self.timeout_seconds is not None and self.timeout_seconds <= 0:
            raise ValueError(f"JobSpec.timeout_seconds={self.timeout_seconds} must be positive (or None for no limit)")


class JobState(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


@dataclass(frozen=True)
class ReplicaStatus:
    rank: int
    state: JobState
    attempts: int = 0
    exit_code: int | None = None
    started_at: str | None = None
    finished_at: str | None = None


@dataclass(frozen=True)
class JobStatus:
    job_id: str
    name: str
    backend: str
    state: JobState
    replicas: tuple[ReplicaStatus, ...] = ()
    parent: str | None = None
    children: tuple[str, ...] = ()
    submitted_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    message: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "name": self.name,
            "backend": self.backend,
            "state": self.state.value,
            "replicas": [{**r.__dict__, "state": r.state.value} for r in self.replicas],
            "parent": self.parent,
            "children": list(self.children),
            "submitted_at": self.submitted_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "message": self.message,
            "labels": dict(self.labels),
        }


class BackendUnavailableError(UserError, ValueError):
    """A backend this build cannot construct (unknown name, or one not implemented here)."""


class CapacityError(UserError, ValueError):
    """A job that can never fit the cluster (refused before submission)."""


class JobNotFoundError(UserError, LookupError):
    """A job id the backend has no record of (a CLI turns this into a clear error, not a traceback)."""


@runtime_checkable
class Backend(Protocol):
    name: str

    def submit(self, spec: JobSpec, *, parent: str | None = None) -> str:
        """Start the gang; returns the job id. `parent` makes it a child job of that job."""

    def check(self, spec: JobSpec, *, parent: str | None = None, beside: Resources | None = None) -> object:
        """Raise CapacityError when `spec` can never be placed (`beside`: resources held meanwhile)."""

    def submit_child(self, spec: JobSpec) -> str:
        """Submit from inside a running job: the current job ($RLAUNCH_JOB_ID) becomes the parent."""

    def status(self, job_id: str) -> JobStatus: ...

    def wait(self, job_id: str, timeout: float | None = None) -> JobStatus:
        """Block until the job is terminal (or `timeout` seconds pass); returns the last status."""

    def logs(
        self, job_id: str, *, replica: int | None = None, follow: bool = False, tail: int | None = None
    ) -> Iterator[str]:
        """Log lines (all replicas interleaved with a `[rank]` prefix unless `replica` is given)."""

    def cancel(self, job_id: str, *, reason: str | None = None) -> JobStatus:
        """Stop the job and, recursively, its children. Idempotent on terminal jobs."""

    def list_jobs(self) -> list[JobStatus]: ...

    def environment(self) -> dict[str, str]:
        """Variables a process needs to reach this same backend (forwarded into every job)."""


def single_replica_lines(lines: Iterator[str], replicas: int) -> Iterator[str]:
    """Drop the `[rank 0] ` prefix from a one-replica job's log lines (for people reading them)."""
    if replicas != 1:
        yield from lines
        return
    for line in lines:
        yield line.removeprefix("[rank 0] ")


def dependency_problem(name: str) -> str | None:
    """Why backend `name` cannot be used from this interpreter, found without importing its client
    (None: it may be): the dry run says it in the words `--run` refuses with (`get_backend`)."""
    if name not in _BACKENDS:
        return f"unknown cluster backend {name!r}; choose one of {sorted(_BACKENDS)}"
    from rlaunch.cluster.iris.connect import installed, iris_problem

    if name == "iris":
        return iris_problem()
    if name == "ray" and not installed("ray"):
        return "the ray backend needs Ray, which is not installed in this environment; install the extra: pip install 'rlaunch[ray]'"
    return None


def get_backend(name: str, **options: Any) -> Backend:
    """Construct a backend by name; an optional dependency missing gives an error naming the extra."""
    target = _BACKENDS.get(name)
    if target is None:
        raise BackendUnavailableError(dependency_problem(name))
    # A client this interpreter lacks is refused by the backend's constructor, in `dependency_problem`'s words.
    module_name, _, class_name = target.partition(":")
    module = importlib.import_module(module_name)
    backend: Backend = getattr(module, class_name)(**options)
    return backend


def backend_from_env() -> Backend | None:
    """Inside a job: the backend that started it (None outside any job)."""
    name = os.environ.get(BACKEND_ENV)
    if not name or not os.environ.get(JOB_ID_ENV):
        return None
    module_name, _, class_name = _BACKENDS[name].partition(":")
    module = importlib.import_module(module_name)
    backend: Backend | None = getattr(module, class_name).from_env()
    return backend


def current_job_id() -> str | None:
    return os.environ.get(JOB_ID_ENV)
