"""Cancelling a sweep: one variant alone by its own identity (the coordinator goes on building the
others), then the whole sweep by its name: every running variant stops and each records its own
cancel, and the coordinator stops, so a queued variant never launches. On the marker runtime, the
real coordinator/host/child path in seconds; the machine declares room for two variants at once."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from tests.support.launchers import REPO, Launcher
from tests.support.polling import wait_for

pytestmark = pytest.mark.launch

VERSION = "2026.12.07"
LABELS = ("lr-1e-3", "lr-2e-3", "lr-3e-3")
MARKER = ("-m", "tests.experiments.marker", "--version", VERSION, "--scenario", "slow", "--steps", "200")
GRID = ("--sweep", "trainer.policy.optimizer_config.lr=1e-3,2e-3,3e-3")
# every process runs this checkout's rlaunch; the machine declares the coordinator and two variants' gangs
ENV = {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")]), "RLAUNCH_LOCAL_CPUS": "3"}


def _record(launcher: Launcher, label: str) -> dict[str, Any]:
    path = launcher.prefix / "marker" / f"rl.{label}" / VERSION / "run_record.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _running(launcher: Launcher) -> list[str]:
    """The variants whose latest attempt has a child job recorded and not ended."""
    return [
        label
        for label in LABELS
        if (attempts := _record(launcher, label).get("attempts"))
        and attempts[-1].get("child_job_id")
        and attempts[-1].get("state") not in ("succeeded", "failed", "cancelled")
    ]


@pytest.mark.e2e
def test_a_sweep_cancels_as_a_whole_and_a_variant_alone(launcher: Launcher) -> None:
    plan = json.loads(launcher.run(*MARKER, *GRID, "--plan-format", "json", env=ENV).stdout)
    sweep = plan["sweep"]["name"]
    submitted = launcher.run(*MARKER, *GRID, "--run", "--detach", env=ENV, timeout=180)
    assert submitted.returncode == 0, submitted.stdout[-2000:] + submitted.stderr[-2000:]
    first, second = wait_for(lambda: _running(launcher) if len(_running(launcher)) == 2 else None, 240, "two variants")
    backend = launcher.backend()
    (coordinator,) = [j for j in backend.list_jobs() if j.labels.get("rlaunch.kind") == "coordinator"]
    assert coordinator.labels["rlaunch.sweep"] == sweep and "rlaunch.artifact" not in coordinator.labels
    assert coordinator.name.startswith(f"marker-rl-{VERSION}-sweep-")  # it builds the sweep, not one variant

    alone = launcher.run("-m", "rlaunch", "cancel", f"marker/rl.{first}@{VERSION}", "--yes", "--reason", "one", env=ENV)
    assert alone.returncode == 0 and ": cancelled (" in alone.stdout, alone.stdout + alone.stderr
    assert coordinator.job_id not in alone.stdout, alone.stdout
    assert not backend.status(coordinator.job_id).state.terminal  # it goes on building the others
    assert second in _running(launcher)

    whole = launcher.run("-m", "rlaunch", "cancel", sweep, "--yes", "--reason", "all", env=ENV, timeout=120)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    wait_for(lambda: all(j.state.terminal for j in backend.list_jobs()), 120, "every job of the sweep to end")
    assert backend.status(coordinator.job_id).state.value == "cancelled"
    reasons = {}
    for label in LABELS:
        record = _record(launcher, label)
        if not record.get("attempts"):
            continue  # queued behind the two, never launched
        assert record["sweep"]["name"] == sweep and record["sweep"]["variant"] == label
        (attempt,) = record["attempts"]
        assert attempt["state"] == "cancelled", attempt
        reasons[label] = attempt["cancelled"]["reason"]
    assert reasons[first] == "one" and reasons[second] == "all", reasons
    assert f"marker/rl.{second}@{VERSION} attempt " in whole.stdout, whole.stdout
