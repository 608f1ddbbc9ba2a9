"""Kill -9 acceptance: SIGKILL to any process of a run, at any phase of its attempt, leaves a record
that `rlaunch status` reports truthfully, and the next `--run` recovers (resuming from the last
checkpoint while training, from the start before it).

The phases are the ones the cancel tests use (`attempt_phases`): the coordinator submitted, the
attempt recorded before the child, the child recorded, training (at its third step, after the
step-2 checkpoint). Every process is killed while training; before it, the processes that run then.

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

from tests.launch.attempt_phases import PHASES, latest_attempt, trained_steps
from tests.support.launchers import REPO, Launcher
from tests.support.polling import wait_for

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


def _job_pid(job: Path, name: str) -> int | None:
    """The supervisor's (supervisor.json) or the first replica's (state.json) pid of a job directory."""
    try:
        data = json.loads((job / name).read_text())
    except (OSError, ValueError):  # not written yet, or being replaced
        return None
    return data.get("pid") if name == "supervisor.json" else (data.get("replicas") or [{}])[0].get("pid")


class Run:
    """One slow marker run in flight, stopped at `phase`, and where each of its processes is."""

    def __init__(self, launcher: Launcher, phase: str, process: str) -> None:
        self.launcher = launcher
        self.jobs = launcher.prefix / ".jobs"
        log = open(launcher.prefix.parent / "front.log", "w")  # noqa: SIM115 - closed with the process
        self.front = subprocess.Popen(
            [sys.executable, *MARKER, "--run"], cwd=REPO, env=launcher.env, stdout=log, stderr=subprocess.STDOUT
        )
        if phase == "training":  # a checkpoint to resume from (step 2) once the third step is logged
            wait_for(lambda: trained_steps(launcher, VERSION) >= 3, 90, "the trainer's third step")
        self.victims: list[int] = wait_for(
            lambda: PHASES[phase](launcher, VERSION) and self._all_found(process), 90, f"{process} at {phase}", 0.02
        )
        self.attempt = latest_attempt(launcher, VERSION)

    def record(self) -> dict | None:
        path = self.launcher.prefix / "marker" / "rl" / VERSION / "run_record.json"
        return json.loads(path.read_text()) if path.exists() else None

    def latest_checkpoint(self) -> int | None:
        """The step of the run's `latest` checkpoint marker, if it has one."""
        marker = next(self.launcher.prefix.glob(f".tmp/*/marker/rl/{VERSION}/checkpoints/latest"), None)
        return int(marker.read_text().strip()) if marker else None

    def _job(self, role: str) -> Path | None:
        """The coordinator's job directory (the one without a parent), or its child's."""
        for job in sorted(self.jobs.glob("*/job.json")):
            try:
                parent = json.loads(job.read_text()).get("parent")
            except ValueError:
                continue
            if (parent is None) == (role == "coordinator"):
                return job.parent
        return None

    def _pid(self, role: str, name: str) -> int | None:
        job = self._job(role)
        return _job_pid(job, name) if job else None

    def pids(self, process: str) -> list[int | None]:
        coordinator, child = self._pid("coordinator", "state.json"), self._pid("child", "state.json")
        found = {
            "front": lambda: [self.front.pid],
            "coordinator": lambda: [coordinator],
            "host": lambda: [
                coordinator and descendant(coordinator, "rlaunch.host --config", "rlaunch launch --config")
            ],
            "supervisor": lambda: [self._pid("child", "supervisor.json")],
            "child": lambda: [child],
            "trainer": lambda: [child and descendant(child, "rlaunch_test_marker")],
        }
        if process == "everything":
            everything = ["coordinator", "host", "supervisor", "child", "trainer"]
            return [self._pid("coordinator", "supervisor.json"), *(pid for name in everything for pid in found[name]())]
        return found[process]()

    def _all_found(self, process: str) -> list[int] | None:
        pids = self.pids(process)
        return [pid for pid in pids if pid] if pids and all(pids) else None


def status(launcher: Launcher) -> dict:
    done = launcher.run("-m", "rlaunch", "status", RUN, "--json", timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# Each process at the phases where it runs and its death means something different; trimmed to the
# cases that teach: every process while training, and the windows before the trainer writes anything.
CASES = [
    *(
        ("training", process)
        for process in ("front", "coordinator", "host", "supervisor", "child", "trainer", "everything")
    ),
    ("coordinator submitted", "coordinator"),
    ("attempt recorded, no child yet", "coordinator"),
    ("attempt recorded, no child yet", "host"),
    ("child recorded", "host"),
    ("child recorded", "supervisor"),
]
assert {phase for phase, _ in CASES} == set(PHASES)


@pytest.mark.parametrize(("phase", "process"), CASES)
def test_kill_9_of_any_process_at_any_phase_is_reported_truthfully_and_the_next_run_recovers(
    launcher: Launcher, phase: str, process: str
) -> None:
    run = Run(launcher, phase, process)
    for pid in run.victims:
        os.kill(pid, signal.SIGKILL)
    if process != "front":
        run.front.wait(30)  # a detached-style front: it only followed the coordinator's log

    if run.record() is None:  # killed before the coordinator recorded anything: the front and the job say so
        assert phase == "coordinator submitted", phase
        said = (launcher.prefix.parent / "front.log").read_text()
        assert run.front.returncode != 0 and "failed: replica 0 failed: exit code -9" in said, said
        jobs = launcher.backend().list_jobs()
        assert [j.state.value for j in jobs] == ["failed"] and "exit code -9" in (jobs[0].message or ""), jobs
        shown = launcher.run("-m", "rlaunch", "status", RUN, "--json", timeout=60)
        assert shown.returncode == 2 and "no RL run" in shown.stderr, shown.stdout + shown.stderr  # nothing invented
        again = launcher.run(*MARKER, "--run", timeout=180)  # nothing failed on record: no --retry needed
        entry: dict = {}
        committed = None
    else:
        shown = wait_for(lambda: (s := status(launcher)) and s["is_terminal"] and s, 120, f"the end after {process}")
        entry = run.record()["attempts"][-1]
        if run.attempt.get("attempt_id"):  # the attempt the kill hit is the one the record ends
            assert entry["attempt_id"] == run.attempt["attempt_id"], (run.attempt, entry)
        if process == "front":  # the run never depended on the front: it finished on its own
            assert shown["state"] == "succeeded" and entry["state"] == "succeeded"
        else:
            assert shown["state"] in ("failed", "cancelled"), shown
            assert entry["state"] in ("failed", "cancelled"), entry  # the record itself, not only the view
            assert shown["failure"] or shown["state_reason"], shown
            if (
                shown["state"] == "failed"
            ):  # a kill is the machine's doing, never the inputs': SIGKILL or a lost supervisor
                found = shown["failure_class"]
                assert found["kind"] == "operational", found
                assert "SIGKILL" in found["evidence"] or found["cause"] == "lost supervisor", found
            assert not any(j.state.value in ("pending", "running") for j in launcher.backend().list_jobs())
        retry = [] if process == "front" else ["--retry", f"the {process} was killed with SIGKILL at {phase}"]
        committed = run.latest_checkpoint()  # the attempt has ended: what it committed is what a resume reads
        again = launcher.run(*MARKER, "--run", *retry, timeout=180)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    final = status(launcher)
    assert final["state"] == "succeeded" and final["steps"]["latest_step"] == STEPS
    if process != "front":
        assert final["attempt_id"] != entry.get("attempt_id")
    if phase == "training" and process != "front":
        # Resumed from the last checkpoint the killed attempt committed: step 2 at least (the kill came
        # after the third step), later where the trainer outlived the killed process for a while.
        assert committed is not None and committed >= 2, committed
        assert final["steps"]["first_step"] == committed + 1, (committed, final["steps"])
    elif phase != "training":
        assert final["steps"]["first_step"] == 1, final["steps"]  # killed before any checkpoint: from the start
    states = [a["state"] for a in (run.record() or {})["attempts"]]
    assert all(s in FINAL for s in states), states
