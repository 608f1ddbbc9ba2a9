"""The CPU smoke through Iris, end to end: coordinator job, child job, TRL GRPO, export, evaluation.

`experiments.smoke --backend iris --run` submits the coordinator to the test cluster; inside it the
launch host submits the training gang as the coordinator's Iris child job; then `verify-smoke`
must PASS, the run record must hold both Iris job ids, and the `iris` CLI must find them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.iris.iris_cluster import IrisCluster
from tests.support.launchers import checkout_launcher, cpu_smoke_through

pytestmark = [pytest.mark.iris, pytest.mark.e2e]


def test_cpu_smoke_runs_through_iris_and_verifies(tmp_path: Path, iris_env: IrisCluster) -> None:
    launcher = checkout_launcher(tmp_path / "prefix", {"IRIS_CONTROLLER_URL": iris_env.url})
    coordinator, child = cpu_smoke_through(launcher, "iris")
    assert coordinator.startswith("/") and child.startswith(coordinator + "/")  # an Iris child of the coordinator

    jobs = launcher.run(
        "-m", "rlaunch", "jobs", "--backend", "iris", "--controller-url", iris_env.url, "status", child, "--json",
        timeout=120,
    )  # fmt: skip
    assert jobs.returncode == 0, jobs.stderr
    shown = json.loads(jobs.stdout)
    assert (shown["state"], shown["parent"], shown["labels"]["rlaunch.kind"]) == ("succeeded", coordinator, "child")
    listed = iris_env.cli("job", "list", "--prefix", coordinator)
    assert child in listed.stdout, listed.stdout + listed.stderr
    logs = iris_env.cli("job", "logs", child)
    assert "step 4/4" in logs.stdout + logs.stderr
