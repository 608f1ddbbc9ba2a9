"""`LocalBackend`: jobs as process groups on this machine, with all state on disk.

`submit` checks capacity, writes the job's directory and starts a detached supervisor, then
returns: from then on any process that can read the root (another shell, the job itself, a
later `rlaunch jobs ...`) can inspect, follow or cancel the job. Nothing here keeps state in
memory, so every method works the same from the submitter and from anywhere else.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import rlaunch
from rlaunch.cluster.base import GangBackend
from rlaunch.cluster.combined_log import LogQuery
from rlaunch.cluster.job_environment import base_environment, free_port, replica_base
from rlaunch.cluster.lifecycle import cancel_message, parent_ended_reason, replica_status
from rlaunch.cluster.local.capacity import Machine, check_fits, env_number
from rlaunch.cluster.local.logs import read_log
from rlaunch.cluster.local.procs import process_alive, stop_groups
from rlaunch.cluster.local.state import JobDir, existing_job, job_ids, new_job, read_json, write_json_atomic
from rlaunch.cluster.protocol import (
    BACKEND_ENV,
    JOB_ID_ENV,
    WORLD_SIZE_ENV,
    JobNotFoundError,
    JobSpec,
    JobState,
    JobStatus,
    Resources,
)
from rlaunch.processes import actor
from rlaunch.secrets import scrub_tree, secret_values
from rlaunch.statefiles import CorruptStateError
from rlaunch.storage import cannot_write, utc_now

ROOT_ENV = "RLAUNCH_LOCAL_ROOT"
KILL_GRACE_ENV = "RLAUNCH_LOCAL_KILL_GRACE"
DEFAULT_KILL_GRACE = 5.0
SUPERVISOR_START_TIMEOUT = 60.0
# A job with no supervisor record this long after submission was abandoned mid-submit.
SUPERVISOR_MISSING_AFTER = 2 * SUPERVISOR_START_TIMEOUT


def default_root() -> Path:
    """`$RLAUNCH_LOCAL_ROOT`, else `<prefix>/.jobs` for a local prefix, else `~/.cache/rlaunch/jobs`."""
    configured = os.environ.get(ROOT_ENV)
    if configured:
        return Path(os.path.abspath(os.path.expanduser(configured)))
    from rlaunch.storage import default_prefix  # imports fsspec: paid only when no root is set

    prefix = default_prefix()
    if "://" not in prefix:
        return Path(prefix) / ".jobs"
    if prefix.startswith("file://"):
        return Path(prefix.removeprefix("file://")) / ".jobs"
    return Path.home() / ".cache" / "rlaunch" / "jobs"


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


def _age_seconds(timestamp: str) -> float:
    return (datetime.now().astimezone() - datetime.fromisoformat(timestamp)).total_seconds()


class LocalBackend(GangBackend):
    """The embedded backend. Arguments override `RLAUNCH_LOCAL_*`, which override what the OS reports."""

    name = "local"

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        cpus: float | None = None,
        accelerators: int | None = None,
        memory: int | str | None = None,
        kill_grace: float | None = None,
    ) -> None:
        self.root = Path(os.path.abspath(os.path.expanduser(root))) if root is not None else default_root()
        self.machine = Machine.declared(cpus, accelerators, memory)
        if kill_grace is None:
            configured = env_number(os.environ, KILL_GRACE_ENV, float)
            kill_grace = DEFAULT_KILL_GRACE if configured is None else configured
        if kill_grace < 0:
            raise ValueError(f"kill_grace={kill_grace} cannot be negative")
        self.kill_grace = kill_grace

    @classmethod
    def from_env(cls) -> LocalBackend:
        """Inside a job: the same root and declared machine as the backend that started it."""
        return cls()

    def environment(self) -> dict[str, str]:
        return {
            BACKEND_ENV: self.name,
            ROOT_ENV: str(self.root),
            KILL_GRACE_ENV: f"{self.kill_grace:g}",
            **self.machine.environment(),
        }

    # -- submitting ----------------------------------------------------------------------------

    def check(self, spec: JobSpec, *, parent: str | None = None, beside: Resources | None = None) -> None:
        """Raise CapacityError when `spec` can never run here. Jobs are checked one by one against the
        machine (a coordinator and its child run side by side), so `parent` and `beside` change nothing."""
        check_fits(spec, self.machine)

    def submit(self, spec: JobSpec, *, parent: str | None = None) -> str:
        working_dir = self._admit(spec, parent)
        job = new_job(self.root, spec.name)
        self._write_records(job, spec, parent, working_dir)
        self._start_supervisor(job, list(spec.argv), self._replica_env(spec, {JOB_ID_ENV: job.job_id}))
        return job.job_id

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

    def _start_supervisor(self, job: JobDir, argv: list[str], env: dict[str, str]) -> None:
        """Start the detached supervisor; its own environment is the allow-list plus how to import rlaunch."""
        package_parent = str(Path(rlaunch.__file__).resolve().parents[1])
        with open(job.supervisor_log, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "rlaunch.cluster.local.supervisor", str(job.path)],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=job.path,
                env={**base_environment(), "PYTHONPATH": package_parent},
                start_new_session=True,
            )
        try:
            # the submitter's own secrets travel in memory (never to the job): its logs are scrubbed of them
            payload = {"argv": argv, "env": env, "scrub": secret_values()}
            proc.communicate(json.dumps(payload).encode(), timeout=SUPERVISOR_START_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.returncode != 0:
            message = f"supervisor failed to start (exit {proc.returncode}); see {job.supervisor_log}"
            job.write_state(
                {**job.read_state(), "state": JobState.FAILED.value, "message": message, "finished_at": utc_now()}
            )
            raise RuntimeError(f"job {job.job_id}: {message}")

    # -- the supervisor's transport (another backend on the same job directories overrides these) --

    def gang_rendezvous(self) -> str:
        """`host:port` free for rank 0's rendezvous (every replica runs on this machine)."""
        return f"127.0.0.1:{free_port('127.0.0.1')}"

    def replica_command(self, rank: int, argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        """What the supervisor starts for one attempt of replica `rank`: here, the job's argv itself."""
        return argv, env

    def _lost_message(self, job: JobDir) -> str:
        """Why a job whose supervisor is gone without an outcome failed."""
        return (
            f"supervisor lost on {socket.gethostname()}: it exited without recording an outcome "
            f"(see {job.supervisor_log}); "
            "stopped the replicas it left"
        )

    def _stop_left(self, pids: list[int]) -> None:
        """Stop the replicas a dead supervisor left running (their process groups on this machine)."""
        stop_groups(pids, self.kill_grace)

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

    def _supervisor_gone(self, job: JobDir, record: dict[str, Any]) -> bool:
        supervisor = read_json(job.supervisor_file)
        if supervisor is None:
            return _age_seconds(record["submitted_at"]) > SUPERVISOR_MISSING_AFTER
        if supervisor["host"] != socket.gethostname():
            return False  # a root shared with another machine: only that machine can tell
        return not process_alive(supervisor["pid"], supervisor["identity"])

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
