"""The CPU smoke through Slurm, end to end: the coordinator is a Slurm job, whose launch host
submits the training gang with sbatch as its child; then `verify-smoke` must PASS, the run record
must hold both Slurm job ids, Slurm must have run both (`scontrol show job`), and `rlaunch logs`
reads the gang's log files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.launching import REPO, Launcher
from tests.slurm.slurm_cluster import SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]

VERSION = "2026.11.30"
TIMEOUT = 1800


def test_cpu_smoke_runs_through_slurm_and_verifies(tmp_path: Path, slurm_env: SlurmCluster) -> None:
    launcher = Launcher(
        tmp_path / "prefix",
        {
            "SLURM_CONF": str(slurm_env.conf),
            "RLAUNCH_SLURM_ROOT": os.environ["RLAUNCH_SLURM_ROOT"],
            "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")]),
        },
    )
    done = launcher.run("-m", "experiments.smoke", "--version", VERSION, "--backend", "slurm", "--run", timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "via slurm" in done.stdout

    rl = launcher.prefix / "smoke" / "rl" / VERSION
    (attempt,) = json.loads((rl / "run_record.json").read_text())["attempts"]
    coordinator, child = attempt["coordinator_job_id"], attempt["child_job_id"]
    assert attempt["backend"] == "slurm" and attempt["state"] == "succeeded"
    for job_id in (coordinator, child):
        shown = slurm_env.command("scontrol", "show", "job", job_id, "-o")
        assert "JobState=COMPLETED" in shown, shown
    assert json.loads((launcher.prefix / "smoke" / "eval" / VERSION / "report.json").read_text())["n"] == 16

    verdict = launcher.run("-m", "rlaunch", "verify-smoke", f"smoke/rl@{VERSION}", timeout=300)
    assert verdict.returncode == 0 and ": PASS" in verdict.stdout, verdict.stdout + verdict.stderr
    status = launcher.run("-m", "rlaunch", "status", f"smoke/rl@{VERSION}", timeout=300)
    assert status.returncode == 0 and coordinator in status.stdout and child in status.stdout, status.stdout
    logs = launcher.run("-m", "rlaunch", "logs", f"smoke/rl@{VERSION}", timeout=300)
    assert logs.returncode == 0 and "entrypoint exited 0" in logs.stdout, logs.stdout[-3000:] + logs.stderr
