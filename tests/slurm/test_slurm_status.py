"""A real RL run on Slurm that waits in the queue: `rlaunch status` shows Slurm's reason for the
coordinator (before the run has a record) and then for the training gang, and cancelling the
coordinator (`rlaunch jobs cancel`) cancels the gang."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rlaunch.cluster.protocol import JobSpec, JobState, Resources
from tests.slurm.slurm_cluster import CPUS_PER_NODE, SlurmCluster
from tests.support.launchers import MULTINODE_SKIP, Launcher
from tests.support.polling import py, wait_for

pytestmark = pytest.mark.slurm
VERSION = "2026.11.30"


def test_queued_jobs_show_slurms_reason_and_cancelling_the_coordinator_cancels_the_gang(
    tmp_path: Path, slurm_env: SlurmCluster
) -> None:
    from rlaunch.cluster.slurm.backend import SlurmBackend

    backend = SlurmBackend(kill_grace=2.0)
    blocker = backend.submit(  # fills both nodes: the coordinator waits
        JobSpec(name="blocker", argv=py("import time; time.sleep(300)"), resources=Resources(cpu=CPUS_PER_NODE))
    )
    other = backend.submit(
        JobSpec(name="blocker", argv=py("import time; time.sleep(300)"), resources=Resources(cpu=CPUS_PER_NODE))
    )
    launcher = Launcher(
        tmp_path / "prefix", {"SLURM_CONF": str(slurm_env.conf), "RLAUNCH_SLURM_ROOT": os.environ["RLAUNCH_SLURM_ROOT"]}
    )
    try:
        running = lambda: all(backend.status(j).state is JobState.RUNNING for j in (blocker, other))  # noqa: E731
        wait_for(running, 60, "the blockers to run")
        done = launcher.run(
            "-m", "tests.experiments.marker", "--version", VERSION, "--backend", "slurm", "--replicas", "2",
            "--run", "--detach", *MULTINODE_SKIP,
        )  # fmt: skip
        assert done.returncode == 0 and "via slurm" in done.stdout, done.stdout + done.stderr
        assert "detached; follow with: rlaunch jobs --backend slurm logs " in done.stdout
        coordinator = done.stdout.split("submitted RL coordinator ")[1].split()[0]
        line = f"coordinator  {coordinator}  pending  (pending in Slurm: Resources)"
        wait_for(
            lambda: line in launcher.run("-m", "rlaunch", "status", f"marker/rl@{VERSION}").stdout,
            60,
            "rlaunch status to show the coordinator's reason",
        )
        backend.cancel(other)  # n2 frees: the coordinator runs there, the 2-node gang still cannot
        record_file = launcher.prefix / "marker" / "rl" / VERSION / "run_record.json"
        record = wait_for(lambda: _with_child(record_file), 120, "the coordinator to submit the gang")
        (attempt,) = record["attempts"]
        assert attempt["coordinator_job_id"] == coordinator
        child = attempt["child_job_id"]
        line = f"child        {child}  pending  (pending in Slurm: Resources)"
        status = wait_for(
            lambda: line in (s := launcher.run("-m", "rlaunch", "status", f"marker/rl@{VERSION}")).stdout and s,
            60,
            "rlaunch status to show the gang's reason",
        )
        assert line in status.stdout

        cancel = launcher.run(
            "-m", "rlaunch", "jobs", "--backend", "slurm", "cancel", coordinator, "--yes", "--reason", "queue too long"
        )
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        child_status = backend.status(child)
        assert child_status.state is JobState.CANCELLED, child_status
        assert f"parent job {coordinator} was cancelled: queue too long" in child_status.message
        wait_for(  # the drivers exit right after recording: Slurm ends both jobs
            lambda: not {coordinator, child} & set(slurm_env.command("squeue", "-h", "-o", "%i").split()),
            30,
            "both jobs to leave squeue",
        )
    finally:
        for job in backend.list_jobs():
            if not job.state.terminal:
                backend.cancel(job.job_id, reason="test over")


def _with_child(record_file: Path) -> dict | None:
    """The run record once its attempt names the child job."""
    record = json.loads(record_file.read_text()) if record_file.exists() else {}
    attempts = record.get("attempts") or []
    return record if attempts and attempts[0].get("child_job_id") else None
