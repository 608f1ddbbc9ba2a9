"""`GangEngine`: the gang engine the local and Slurm backends share; a job is a directory of state files.

A job lives under `root` (`state.JobDir`: job.json, state.json, cancel.json, children/, logs); one
supervisor per job (`supervisor.Supervisor`) runs its gang lifecycle and is the only writer of its
state while alive. The engine admits and records a job, reads its status from those files, cancels
through cancel requests (the supervisor obeys them), takes over from a supervisor that is gone, and
lists jobs; it keeps nothing in memory, so every method works the same from the submitter and from
anywhere that reads the root.

It is not a backend by itself: a transport subclasses it with how a job is checked and started and
how a replica runs (the local machine: `cluster.local`; Slurm: `cluster.slurm`):

    check(spec)                 whether the job could ever run
    submit(spec)                start the job's supervisor (after `_admit` and `_write_records`)
    gang_rendezvous()           rank 0's rendezvous address
    replica_command(rank, ...)  what the supervisor starts for one attempt of a replica
    _supervisor_gone(job, rec)  whether the job's supervisor ended without recording an outcome
    _lost_message(job)          why such a job failed
    scheduler_failure(job_id)   why the scheduler is ending the job, when a node failed (optional)
    _stop_left(pids)            stop the replicas a dead supervisor left running
"""

from __future__ import annotations

import abc
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rlaunch.cluster.base import GangBackend
from rlaunch.cluster.combined_log import LogQuery
from rlaunch.cluster.gang.logs import read_log
from rlaunch.cluster.gang.state import JobDir, existing_job, job_ids
from rlaunch.cluster.job_environment import base_environment, replica_base
from rlaunch.cluster.lifecycle import cancel_message, parent_ended_reason, replica_status
from rlaunch.cluster.protocol import WORLD_SIZE_ENV, JobNotFoundError, JobSpec, JobState, JobStatus, Resources
from rlaunch.processes import actor
from rlaunch.secrets import scrub_tree
from rlaunch.statefiles import CorruptStateError
from rlaunch.storage import cannot_write, utc_now, write_json_atomic

KILL_GRACE_ENV = "RLAUNCH_LOCAL_KILL_GRACE"  # both engines' kill grace, forwarded into their jobs
DEFAULT_KILL_GRACE = 5.0


def _check_executable(program: str, path: str | None, working_dir: str) -> None:
    """Refuse at submit, not on every retry, an argv[0] the job could never start."""
    if os.sep in program:
        found = os.path.join(working_dir, program)
        if not (os.path.isfile(found) and os.access(found, os.X_OK)):
            raise ValueError(f"JobSpec.argv[0] {program!r} is not an executable file (relative to {working_dir})")
    elif shutil.which(program, path=path or os.defpath) is None:
        raise ValueError(
            f"JobSpec.argv[0] {program!r} is not on the job's PATH ({path}); give a full path or set PATH in spec.env"
        )


def _pending_replica(rank: int) -> dict[str, Any]:
    keys = ("exit_code", "pid", "started_at", "finished_at")
    return {"rank": rank, "state": JobState.PENDING.value, "attempts": 0, "exit_codes": [], **dict.fromkeys(keys)}


class GangEngine(GangBackend):
    """Jobs as directories under `root`, each run by a supervisor; a transport adds the hooks above."""

    def __init__(self, root: Path, kill_grace: float) -> None:
        if kill_grace < 0:
            raise ValueError(f"kill_grace={kill_grace} cannot be negative")
        self.root = root
        self.kill_grace = kill_grace

    # -- the transport's part ------------------------------------------------------------------

    @abc.abstractmethod
    def check(self, spec: JobSpec, *, parent: str | None = None, beside: Resources | None = None) -> None:
        """Raise CapacityError when `spec` could never run on this transport."""

    @abc.abstractmethod
    def gang_rendezvous(self) -> str:
        """`host:port` free for rank 0's rendezvous."""

    @abc.abstractmethod
    def replica_command(self, rank: int, argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        """What the supervisor starts for one attempt of replica `rank`, and its environment."""

    @abc.abstractmethod
    def _supervisor_gone(self, job: JobDir, record: dict[str, Any]) -> bool:
        """Whether the job's supervisor is gone (its outcome, if any, is already in state.json)."""

    @abc.abstractmethod
    def _lost_message(self, job: JobDir) -> str:
        """Why a job whose supervisor is gone without an outcome failed."""

    @abc.abstractmethod
    def _stop_left(self, pids: list[int]) -> None:
        """Stop the replicas a dead supervisor left running."""

    def scheduler_failure(self, job_id: str) -> str | None:
        """Asked by a supervisor that received a signal or saw a replica attempt end: the scheduler's
        own account when it is ending the job because of a failure of the machine (a node that
        failed), else None (a signal is then a cancel: scancel, a time limit, a person; an attempt's
        end is the replica's own). No scheduler here: always None."""
        return None

    # -- submitting ----------------------------------------------------------------------------

    def _admit(self, spec: JobSpec, parent: str | None) -> str:
        """Every check before anything is written; returns the job's working directory."""
        self.check(spec, parent=parent)
        self._check_spec_env(spec)
        working_dir = os.path.abspath(spec.working_dir or os.getcwd())
        if not os.path.isdir(working_dir):
            raise ValueError(f"JobSpec.working_dir {working_dir!r} is not a directory")
        _check_executable(spec.argv[0], {**base_environment(), **spec.env}.get("PATH"), working_dir)
        if parent is not None:
            self._check_live_parent(parent)
        return working_dir

    def _replica_env(self, spec: JobSpec, extra: dict[str, str]) -> dict[str, str]:
        """What every replica starts from (the supervisor adds its rank and the rendezvous)."""
        return replica_base({**spec.env, **self.environment(), WORLD_SIZE_ENV: str(spec.replicas), **extra})

    def _write_records(self, job: JobDir, spec: JobSpec, parent: str | None, working_dir: str) -> None:
        """state.json (pending), then job.json (which makes the directory a job), then the parent's marker."""
        visible = {**os.environ, **spec.env}
        job.write_state({
            "state": JobState.PENDING.value,
            "message": None,
            "started_at": None,
            "finished_at": None,
            "rendezvous": None,
            "cancel": None,
            "replicas": [_pending_replica(rank) for rank in range(spec.replicas)],
        })  # fmt: skip
        write_json_atomic(job.job_file, scrub_tree({
            "job_id": job.job_id,
            "name": spec.name,
            "argv": list(spec.argv),
            "env_keys": sorted(spec.env),
            "working_dir": working_dir,
            "resources": dict(vars(spec.resources)),
            "replicas": spec.replicas,
            "timeout_seconds": spec.timeout_seconds,
            "max_retries": spec.max_retries,
            "labels": dict(spec.labels),
            "parent": parent,
            "submitted_at": utc_now(),
            "submitted_by": actor(),
            "kill_grace": self.kill_grace,
        }, visible))  # fmt: skip
        if parent is not None:
            existing_job(self.root, parent).add_child(job.job_id)

    # -- inspecting ----------------------------------------------------------------------------

    def status(self, job_id: str) -> JobStatus:
        job = existing_job(self.root, job_id)
        record = job.read_job()
        state = job.read_state()
        if not JobState(state["state"]).terminal and self._supervisor_gone(job, record):
            state = job.read_state()  # it writes the terminal state before exiting: re-read before taking over
            if not JobState(state["state"]).terminal:
                state = self._take_over(job, state)
        return JobStatus(
            job_id=job_id,
            name=record["name"],
            backend=self.name,
            state=JobState(state["state"]),
            replicas=tuple(replica_status(r, JobState(state["state"])) for r in state["replicas"]),
            parent=record["parent"],
            children=tuple(job.children()),
            submitted_at=record["submitted_at"],
            started_at=state["started_at"],
            finished_at=state["finished_at"],
            message=state["message"],
            labels=record["labels"],
        )

    def _replica_count(self, job_id: str) -> int:
        return int(existing_job(self.root, job_id).read_job()["replicas"])

    def _log_lines(self, job_id: str, query: LogQuery) -> Iterator[str]:
        return read_log(existing_job(self.root, job_id).combined_log, query)

    def _statuses(self) -> list[JobStatus]:
        return self._scan()[0]

    def listing(self) -> tuple[list[JobStatus], list[CorruptStateError]]:
        """Every readable job's status, oldest first, and the jobs whose files are damaged (reported,
        never fatal: one damaged job must not hide the others)."""
        statuses, damaged = self._scan()
        return sorted(statuses, key=lambda s: (s.submitted_at or "", s.job_id)), damaged

    def _scan(self) -> tuple[list[JobStatus], list[CorruptStateError]]:
        statuses, damaged = [], []
        for job_id in job_ids(self.root):
            try:
                statuses.append(self.status(job_id))
            except JobNotFoundError:
                continue  # removed while listing
            except CorruptStateError as exc:
                damaged.append(exc)
        return statuses, damaged

    # -- stopping ------------------------------------------------------------------------------

    def cancel_children(self, job_id: str, *, reason: str, wait: bool = True) -> None:
        """Cancel the job's unfinished children (their supervisors cascade further down).

        A supervisor calls this when its job ends, so children never outlive their parent.
        """
        children = existing_job(self.root, job_id).children()
        self._request_cancel(children, reason)
        if wait:
            self._await_ended(children)

    def _ended(self, job_id: str) -> bool:
        return self.status(job_id).state.terminal

    def _request_cancel(self, job_ids: list[str], reason: str | None) -> None:
        for job_id in job_ids:
            if not self._ended(job_id):
                existing_job(self.root, job_id).request_cancel(reason)

    def _child_lookup(self) -> Callable[[str], list[str]]:
        return lambda job_id: existing_job(self.root, job_id).children()

    # -- a supervisor that is gone -------------------------------------------------------------

    def _take_over(self, job: JobDir, state: dict[str, Any]) -> dict[str, Any]:
        """Record the outcome a dead supervisor could not: stop what it left running, cancel its children."""
        cancel = job.read_cancel()
        if cancel:
            ended, message = (
                JobState.CANCELLED,
                cancel_message(cancel) + " (its supervisor was gone; stopped the replicas directly)",
            )
        else:
            ended, message = JobState.FAILED, self._lost_message(job)
        unfinished = [r for r in state["replicas"] if not JobState(r["state"]).terminal]
        self._stop_left([r["pid"] for r in unfinished if r["pid"]])
        for replica in unfinished:
            replica.update(state=ended.value, finished_at=utc_now())
        state.update(state=ended.value, message=message, finished_at=utc_now(), cancel=cancel)
        try:
            job.write_state(state)
        except OSError as exc:
            if not cannot_write(exc):
                raise
            return state  # a reader of a read-only or full root: the outcome holds in memory; a writer records it
        self.cancel_children(job.job_id, reason=parent_ended_reason(job.job_id, ended.value), wait=False)
        return state
