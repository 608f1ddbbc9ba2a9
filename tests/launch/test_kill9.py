"""Kill -9 acceptance: SIGKILL to any process of a run leaves a record that `rlaunch status`
reports truthfully, and the next `--run` recovers (resuming from the last checkpoint).

The processes of a run on the local backend: the front (`python -m <experiment> --run`), the
coordinator job's supervisor and replica (the coordinator), the launch host it starts, the child
gang's supervisor and replica (the task bootstrap), and the trainer the bootstrap starts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.launching import REPO, Launcher
from tests.polling import wait_for

pytestmark = pytest.mark.launch

VERSION = "2026.11.30"
RUN = f"marker/rl@{VERSION}"
STEPS = 10
MARKER = ("-m", "tests.experiments.marker", "--version", VERSION, "--scenario", "slow", "--steps", str(STEPS))
FINAL = ("succeeded", "failed", "cancelled")


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def descendant(pid: int, *fragments: str) -> int | None:
    """The first process below `pid` whose command line contains one of `fragments`."""
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        for child in children(current):
            try:
                cmdline = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if any(fragment in cmdline for fragment in fragments):
                return child
            frontier.append(child)
    return None


class Run:
    """One slow marker run in flight, and where each of its processes is."""

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher
        self.jobs = launcher.prefix / ".jobs"
        log = open(launcher.prefix.parent / "front.log", "w")  # noqa: SIM115 - closed with the process
        self.front = subprocess.Popen(
            [sys.executable, *MARKER, "--run"], cwd=REPO, env=launcher.env, stdout=log, stderr=subprocess.STDOUT
        )
        self.attempt = wait_for(self._training_attempt, 90, "the trainer's third step")

    def record(self) -> dict | None:
        path = self.launcher.prefix / "marker" / "rl" / VERSION / "run_record.json"
        return json.loads(path.read_text()) if path.exists() else None

    def _training_attempt(self) -> dict | None:
        attempts = (self.record() or {}).get("attempts") or []
        if not attempts or not attempts[-1].get("child_job_id"):
            return None
        attempt_id = attempts[-1]["attempt_id"]
        metrics = list(self.launcher.prefix.glob(f".tmp/*/marker/rl/{VERSION}/attempts/{attempt_id}/metrics.jsonl"))
        return attempts[-1] if metrics and len(metrics[0].read_text().splitlines()) >= 3 else None

    def _job(self, role: str) -> Path:
        return self.jobs / self.attempt[f"{role}_job_id"]

    def supervisor(self, role: str) -> int:
        return json.loads((self._job(role) / "supervisor.json").read_text())["pid"]

    def replica(self, role: str) -> int:
        return json.loads((self._job(role) / "state.json").read_text())["replicas"][0]["pid"]

    def pids(self, process: str) -> list[int]:
        coordinator, child = self.replica("coordinator"), self.replica("child")
        found = {
            "front": [self.front.pid],
            "coordinator": [coordinator],
            "host": [descendant(coordinator, "rlaunch.host --config", "rlaunch launch --config")],
            "supervisor": [self.supervisor("child")],
            "child": [child],
            "trainer": [descendant(child, "rlaunch_test_marker")],
        }
        if process == "everything":
            everything = [self.supervisor("coordinator"), self.supervisor("child"), coordinator, child]
            return everything + [*found["host"], *found["trainer"]]
        return found[process]


def status(launcher: Launcher) -> dict:
    done = launcher.run("-m", "rlaunch", "status", RUN, "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("process", ["front", "coordinator", "host", "supervisor", "child", "trainer", "everything"])
def test_kill_9_of_any_process_is_reported_truthfully_and_the_next_run_recovers(
    launcher: Launcher, process: str
) -> None:
    run = Run(launcher)
    victims = run.pids(process)
    assert victims and all(victims), f"{process}: not found among the run's processes"
    for pid in victims:
        os.kill(pid, signal.SIGKILL)
    if process != "front":
        run.front.wait(30)  # a detached-style front: it only followed the coordinator's log

    shown = wait_for(lambda: (s := status(launcher)) and s["is_terminal"] and s, 120, f"a final state after {process}")
    entry = run.record()["attempts"][-1]
    assert entry["attempt_id"] == run.attempt["attempt_id"]
    if process == "front":  # the run never depended on the front: it finished on its own
        assert shown["state"] == "succeeded" and entry["state"] == "succeeded"
    else:
        assert shown["state"] in ("failed", "cancelled"), shown
        assert entry["state"] in ("failed", "cancelled"), entry  # the record itself, not only the view
        assert shown["failure"] or shown["state_reason"], shown
        assert not any(j.state.value in ("pending", "running") for j in launcher.backend().list_jobs())

    retry = [] if process == "front" else ["--retry", f"the {process} was killed with SIGKILL"]  # an operational end
    again = launcher.run(*MARKER, "--run", *retry, timeout=180)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    final = status(launcher)
    assert final["state"] == "succeeded" and final["steps"]["latest_step"] == STEPS
    if process != "front":
        assert final["attempt_id"] != run.attempt["attempt_id"]
        assert 1 < final["steps"]["first_step"] <= 4, final["steps"]  # resumed from the step-2 checkpoint
    states = [a["state"] for a in run.record()["attempts"]]
    assert all(s in FINAL for s in states), states
