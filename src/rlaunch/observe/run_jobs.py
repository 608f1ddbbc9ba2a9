"""The cluster jobs of a run, read through the `Backend` protocol.

A run record names its backend, placement and job ids. For the local backend the job root is
not part of the placement, so it is looked for where a run's jobs would be: the placement's
`root`, `$RLAUNCH_LOCAL_ROOT`, then `{prefix}/.jobs` (the default for a local prefix). A
coordinator that has not written its run's record yet (one still queued in Slurm) is found on
the local roots and on the Slurm job root.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from rlaunch.cluster.protocol import Backend, JobNotFoundError, JobStatus


@dataclass
class ReplicaView:
    rank: int
    state: str
    attempts: int = 0
    exit_code: int | None = None
    started_at: str | None = None
    finished_at: str | None = None


@dataclass
class JobView:
    """One job as observed; `error` says why its state could not be read (state is then "unknown")."""

    role: str  # "coordinator" or "child"
    job_id: str
    state: str = "unknown"
    message: str | None = None
    replicas: list[ReplicaView] = field(default_factory=list)
    submitted_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    error: str | None = None

    @property
    def terminal(self) -> bool:
        return self.state in ("succeeded", "failed", "cancelled")


def _local_roots(placement: dict[str, Any], prefix: str | None) -> list[str | None]:
    roots: list[str | None] = []
    if placement.get("root"):
        roots.append(str(placement["root"]))
    if os.environ.get("RLAUNCH_LOCAL_ROOT"):
        roots.append(os.environ["RLAUNCH_LOCAL_ROOT"])
    if prefix and ("://" not in prefix or prefix.startswith("file://")):
        roots.append(os.path.join(prefix.removeprefix("file://"), ".jobs"))
    roots.append(None)  # the backend's own default
    unique: list[str | None] = []
    for root in roots:
        if root not in unique:
            unique.append(root)
    return unique


def backends(name: str, placement: dict[str, Any] | None, prefix: str | None) -> list[Backend]:
    """Backends that may hold a run's jobs, most likely first (several only for `local`)."""
    from rlaunch.cluster.protocol import get_backend

    options = {k: v for k, v in (placement or {}).items() if k != "root"}
    if name != "local":
        return [get_backend(name, **dict(placement or {}))]
    return [
        get_backend("local", **options, **({"root": root} if root else {}))
        for root in _local_roots(placement or {}, prefix)
    ]


def lookup(job_id: str, candidates: list[Backend]) -> tuple[Backend, JobStatus] | None:
    for backend in candidates:
        try:
            return backend, backend.status(job_id)
        except JobNotFoundError:
            continue
    return None


def unrecorded_backends(prefix: str | None) -> list[Backend]:
    """Where a job without a run record may be: the local backend's roots, and the Slurm backend's
    job root when one exists on this machine ($RLAUNCH_SLURM_ROOT, else {prefix}/.slurm-jobs)."""
    from rlaunch.cluster.protocol import get_backend

    found = backends("local", {}, prefix)
    local_prefix = (
        prefix.removeprefix("file://") if prefix and ("://" not in prefix or prefix.startswith("file://")) else None
    )
    slurm_root = os.environ.get("RLAUNCH_SLURM_ROOT") or (
        os.path.join(local_prefix, ".slurm-jobs") if local_prefix else None
    )
    if slurm_root and os.path.isdir(slurm_root):
        found.append(get_backend("slurm", root=slurm_root))
    return found


def find_job(job_id: str, prefix: str | None) -> tuple[Backend, JobStatus] | None:
    """A job by id alone (a run reference that is a bare job id), local or Slurm."""
    try:
        return lookup(job_id, unrecorded_backends(prefix))
    except (ValueError, OSError):
        return None


def view(role: str, job_id: str, found: tuple[Backend, JobStatus] | None, error: str | None = None) -> JobView:
    if found is None:
        return JobView(role=role, job_id=job_id, error=error or "the backend has no record of this job")
    status = found[1]
    return JobView(
        role=role,
        job_id=job_id,
        state=status.state.value,
        message=status.message,
        replicas=[
            ReplicaView(r.rank, r.state.value, r.attempts, r.exit_code, r.started_at, r.finished_at)
            for r in status.replicas
        ],
        submitted_at=status.submitted_at,
        started_at=status.started_at,
        finished_at=status.finished_at,
    )


def run_jobs(attempt: dict[str, Any], prefix: str | None) -> tuple[list[Backend], JobView | None, JobView | None]:
    """(backends tried, coordinator view, child view) for one attempt of the run record."""
    name = attempt.get("backend") or "local"
    try:
        candidates = backends(name, attempt.get("placement"), prefix)
    except Exception as exc:  # noqa: BLE001 - e.g. the ray extra is not installed here
        error = f"cannot reach the {name} backend: {exc}"
        coordinator = (
            JobView("coordinator", attempt["coordinator_job_id"], error=error)
            if attempt.get("coordinator_job_id")
            else None
        )
        child = JobView("child", attempt["child_job_id"], error=error) if attempt.get("child_job_id") else None
        return [], coordinator, child
    views: list[JobView | None] = []
    for role in ("coordinator", "child"):
        job_id = attempt.get(f"{role}_job_id")
        if not job_id:
            views.append(None)
            continue
        try:
            views.append(view(role, job_id, lookup(job_id, candidates)))
        except Exception as exc:  # noqa: BLE001 - an unreachable cluster is shown, not raised
            views.append(JobView(role, job_id, error=f"{type(exc).__name__}: {exc}"))
    return candidates, views[0], views[1]


def log_tail(job_id: str, candidates: list[Backend], lines: int) -> list[str]:
    """The last `lines` log lines of a job, from the first backend that knows it; [] where none can be
    read: a log is evidence of why a job failed, never a reason for a view to fail."""
    for backend in candidates:
        try:
            return list(backend.logs(job_id, tail=lines))
        except JobNotFoundError:
            continue
        except Exception:  # noqa: BLE001 - an unreachable cluster or a log already purged
            return []
    return []
