"""`LocalBackend`: jobs as process groups on this machine, with all state on disk (the gang engine's).

`submit` checks capacity, writes the job's directory (`rlaunch.cluster.gang.engine.GangEngine`) and
starts a detached supervisor (`job_driver`), then returns: from then on any process that can read the root (another shell, the job itself, a
later `rlaunch jobs ...`) can inspect, follow or cancel the job. Nothing here keeps state in
memory, so every method works the same from the submitter and from anywhere else.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import rlaunch
from rlaunch.cluster.gang.engine import DEFAULT_KILL_GRACE, KILL_GRACE_ENV, GangEngine
from rlaunch.cluster.gang.procs import process_alive, stop_groups
from rlaunch.cluster.gang.state import JobDir, new_job, read_json
from rlaunch.cluster.job_environment import base_environment, free_port
from rlaunch.cluster.local.capacity import Machine, check_fits, env_number
from rlaunch.cluster.protocol import BACKEND_ENV, JOB_ID_ENV, JobSpec, JobState, Resources
from rlaunch.secrets import secret_values
from rlaunch.storage import utc_now

ROOT_ENV = "RLAUNCH_LOCAL_ROOT"
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


def _age_seconds(timestamp: str) -> float:
    return (datetime.now().astimezone() - datetime.fromisoformat(timestamp)).total_seconds()


class LocalBackend(GangEngine):
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
        self.machine = Machine.declared(cpus, accelerators, memory)
        if kill_grace is None:
            configured = env_number(os.environ, KILL_GRACE_ENV, float)
            kill_grace = DEFAULT_KILL_GRACE if configured is None else configured
        super().__init__(
            Path(os.path.abspath(os.path.expanduser(root))) if root is not None else default_root(), kill_grace
        )

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

    def _start_supervisor(self, job: JobDir, argv: list[str], env: dict[str, str]) -> None:
        """Start the detached supervisor; its own environment is the allow-list plus how to import rlaunch."""
        package_parent = str(Path(rlaunch.__file__).resolve().parents[1])
        with open(job.supervisor_log, "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "rlaunch.cluster.local.job_driver", str(job.path)],
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

    # -- the supervisor's transport ----------------------------------------------------------------

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

    def _supervisor_gone(self, job: JobDir, record: dict[str, Any]) -> bool:
        supervisor = read_json(job.supervisor_file)
        if supervisor is None:
            return _age_seconds(record["submitted_at"]) > SUPERVISOR_MISSING_AFTER
        if supervisor["host"] != socket.gethostname():
            return False  # a root shared with another machine: only that machine can tell
        return not process_alive(supervisor["pid"], supervisor["identity"])
