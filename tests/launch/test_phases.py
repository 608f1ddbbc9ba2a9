"""A real launch records where its seconds went: every phase, in order, in the run record."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime

import pytest

from tests.support.launchers import REPO, Launcher

pytestmark = pytest.mark.launch

VERSION = "2026.11.30"
EXPECTED = [
    "submitted",
    "coordinator_started",
    "graph_planned",
    "host_started",
    "child_submitted",
    "replica_0_joined",
    "inputs_staged",
    "trainer_started",
    "first_optimizer_step",
    "trainer_exited",
    "finished",
]


def test_run_record_carries_every_phase_in_launch_order_and_status_prints_them(launcher: Launcher) -> None:
    done = launcher.run("-m", "tests.experiments.marker", "--version", VERSION, "--run")
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((launcher.prefix / "marker" / "rl" / VERSION / "run_record.json").read_text())
    phases = record["attempts"][-1]["phases"]
    assert sorted(phases) == sorted(EXPECTED)
    moments = [datetime.fromisoformat(phases[name]) for name in EXPECTED]
    assert moments == sorted(moments), list(zip(EXPECTED, moments))  # one machine: one clock

    shown = subprocess.run(
        [sys.executable, "-m", "rlaunch", "status", f"marker/rl@{VERSION}"],
        cwd=REPO,
        env=launcher.env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    table = shown.stdout[shown.stdout.index("phases") :].splitlines()[: len(EXPECTED)]
    assert [line.split()[-4] for line in table] == EXPECTED, shown.stdout
