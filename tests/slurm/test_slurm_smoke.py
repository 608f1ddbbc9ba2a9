"""The CPU smoke through Slurm, end to end: the coordinator is a Slurm job, whose launch host
submits the training gang with sbatch as its child; then `verify-smoke` must PASS, the run record
must hold both Slurm job ids, Slurm must have run both (`scontrol show job`), and `rlaunch logs`
reads the gang's log files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.slurm.slurm_cluster import SlurmCluster
from tests.support.launchers import SMOKE_VERSION, checkout_launcher, cpu_smoke_through

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


def test_cpu_smoke_runs_through_slurm_and_verifies(tmp_path: Path, slurm_env: SlurmCluster) -> None:
    env = {"SLURM_CONF": str(slurm_env.conf), "RLAUNCH_SLURM_ROOT": os.environ["RLAUNCH_SLURM_ROOT"]}
    launcher = checkout_launcher(tmp_path / "prefix", env)
    for job_id in cpu_smoke_through(launcher, "slurm"):
        shown = slurm_env.command("scontrol", "show", "job", job_id, "-o")
        assert "JobState=COMPLETED" in shown, shown
    logs = launcher.run("-m", "rlaunch", "logs", f"smoke/rl@{SMOKE_VERSION}", timeout=300)
    assert logs.returncode == 0 and "entrypoint exited 0" in logs.stdout, logs.stdout[-3000:] + logs.stderr
