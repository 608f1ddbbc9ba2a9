"""The CPU smoke through Iris, end to end: coordinator job, child job, TRL GRPO, export, evaluation.

`experiments.smoke --backend iris --run` submits the coordinator to the test cluster; inside it the
launch host submits the training gang as the coordinator's Iris child job; then `verify-smoke`
must PASS, the run record must hold both Iris job ids, and the `iris` CLI must find them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.iris.iris_cluster import IrisCluster
from tests.launching import REPO, Launcher

pytestmark = [pytest.mark.iris, pytest.mark.e2e]

VERSION = "2026.11.30"
TIMEOUT = 1800


def test_cpu_smoke_runs_through_iris_and_verifies(tmp_path: Path, iris_env: IrisCluster) -> None:
    launcher = Launcher(
        tmp_path / "prefix",
        {
            "IRIS_CONTROLLER_URL": iris_env.url,
            # the tier runs rlaunch from the checkout: every job needs src/ on its path too
            "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")]),
        },
    )
    done = launcher.run("-m", "experiments.smoke", "--version", VERSION, "--backend", "iris", "--run", timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "via iris" in done.stdout

    rl = launcher.prefix / "smoke" / "rl" / VERSION
    (attempt,) = json.loads((rl / "run_record.json").read_text())["attempts"]
    coordinator, child = attempt["coordinator_job_id"], attempt["child_job_id"]
    assert attempt["backend"] == "iris" and attempt["state"] == "succeeded"
    assert coordinator.startswith("/") and child.startswith(coordinator + "/")  # an Iris child of the coordinator
    assert json.loads((rl / "terminal.json").read_text())["result"]["state"] == "succeeded"
    report = json.loads((launcher.prefix / "smoke" / "eval" / VERSION / "report.json").read_text())
    assert report["n"] == 16

    rlaunch = [sys.executable, "-m", "rlaunch"]
    verdict = launcher.run("-m", "rlaunch", "verify-smoke", f"smoke/rl@{VERSION}", timeout=300)
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
    assert ": PASS" in verdict.stdout

    status = launcher.run("-m", "rlaunch", "status", f"smoke/rl@{VERSION}", timeout=300)
    assert status.returncode == 0 and coordinator in status.stdout and child in status.stdout, status.stdout
    jobs = subprocess.run(
        [*rlaunch, "jobs", "--backend", "iris", "--controller-url", iris_env.url, "status", child, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=launcher.env,
        cwd=REPO,
    )
    assert jobs.returncode == 0, jobs.stderr
    shown = json.loads(jobs.stdout)
    assert (shown["state"], shown["parent"], shown["labels"]["rlaunch.kind"]) == ("succeeded", coordinator, "child")

    listed = subprocess.run(
        [iris_env.iris, "--controller-url", iris_env.url, "job", "list", "--prefix", coordinator],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child in listed.stdout, listed.stdout + listed.stderr
    logs = subprocess.run(
        [iris_env.iris, "--controller-url", iris_env.url, "job", "logs", child],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "step 4/4" in logs.stdout + logs.stderr
