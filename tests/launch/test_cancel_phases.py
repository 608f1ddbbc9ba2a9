"""`rlaunch cancel` works at every moment of an attempt.

A run is launched (detached) and cancelled at each phase boundary (`attempt_phases`, the table the
kill -9 tests share), looked for in its durable state:
the coordinator submitted and nothing recorded yet; the attempt recorded by the coordinator but
no child job recorded by the host yet (the window where a cancel used to answer "nothing to
cancel" while both jobs ran on); the child recorded; training; and, in a run made slow there
(`SLOW_PHASES`), staging the model and exporting. Each cancel must stop every job of the run,
leave the record saying so and leave no staged input on the node (whole or part); one at staging
starts no trainer, one at exporting publishes nothing. After the run finished, a cancel says there is nothing to
cancel. A cancel that cannot act (the attempt is open but its jobs cannot be found) says so and
exits non-zero.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.launch.attempt_phases import PHASES, SLOW_PHASES, child_job, latest_attempt, replica_pid, staging_copies
from tests.support.launchers import REPO, Launcher
from tests.support.polling import wait_for

pytestmark = pytest.mark.launch

VERSION = "2026.12.06"
RUN = f"marker/rl@{VERSION}"


def _marker(steps: int) -> tuple[str, ...]:
    return ("-m", "tests.experiments.marker", "--version", VERSION, "--scenario", "slow", "--steps", str(steps))


@pytest.mark.parametrize("phase", [*PHASES, *SLOW_PHASES])
def test_a_cancel_at_each_phase_stops_every_job_of_the_run(launcher: Launcher, phase: str) -> None:
    slower, reached = SLOW_PHASES.get(phase, ((), PHASES.get(phase)))
    assert reached is not None
    submitted = launcher.run(*_marker(200), *slower, "--run", "--detach", timeout=180)
    assert submitted.returncode == 0, submitted.stdout[-2000:] + submitted.stderr[-2000:]
    cancel = ("-m", "rlaunch", "cancel", RUN, "--yes", "--reason", f"at {phase}")
    if phase == "staging":
        done = _cancel_frozen(launcher, lambda: reached(launcher, VERSION), cancel)
    else:
        wait_for(lambda: reached(launcher, VERSION), 120, phase, interval=0.02)
        done = launcher.run(*cancel, timeout=120)
    assert done.returncode == 0 and ": cancelled (" in done.stdout, done.stdout + done.stderr
    backend = launcher.backend()
    wait_for(lambda: all(j.state.terminal for j in backend.list_jobs()), 60, "every job of the run to end")
    jobs = backend.list_jobs()
    assert jobs and all(j.state.value == "cancelled" for j in jobs), [(j.job_id, j.state.value) for j in jobs]
    attempt = latest_attempt(launcher, VERSION)
    if attempt.get("attempt_id"):  # an attempt the cancel knew of says who cancelled it
        assert attempt["state"] == "cancelled" and attempt["cancelled"]["reason"] == f"at {phase}", attempt
    left = [p for p in (launcher.prefix / "_staging").glob("*/*/replica-*")]
    assert not left, f"a cancel at {phase} left the task's staged inputs on the node: {left}"
    if phase == "staging":
        assert not list(launcher.prefix.rglob("model_load.json")), "the trainer started after a cancel at staging"
    if phase == "exporting":  # a cancelled export is never published as the run's output
        assert not (launcher.prefix / "marker" / "rl" / VERSION / "policy").exists()
        shown = launcher.run("-m", "rlaunch", "status", RUN, "--json", timeout=60)
        assert json.loads(shown.stdout)["state"] == "cancelled", shown.stdout


def _cancel_frozen(
    launcher: Launcher, reached: Callable[[], bool], cancel: tuple[str, ...]
) -> subprocess.CompletedProcess[str]:
    """Cancel while the child is held where it is: once `reached`, it is stopped (SIGSTOP), the
    cancel is asked for, and it goes on (SIGCONT) once the request is on record, so the cancel lands
    there however fast the child would otherwise move on."""
    job = wait_for(lambda: child_job(launcher), 120, "the child job")
    pid = wait_for(lambda: replica_pid(job), 60, "the child's replica pid", interval=0.01)
    wait_for(reached, 120, "the child staging", interval=0.01)
    os.kill(pid, signal.SIGSTOP)
    try:
        assert staging_copies(launcher), "staging ended before the stop"
        asked = subprocess.Popen(
            [sys.executable, *cancel],
            cwd=REPO,
            env=launcher.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        wait_for(lambda: (job / "cancel.json").exists(), 60, "the cancel request on record")
    finally:
        os.kill(pid, signal.SIGCONT)
    stdout, stderr = asked.communicate(timeout=120)
    return subprocess.CompletedProcess(asked.args, asked.returncode, stdout, stderr)


def test_after_the_run_finished_there_is_nothing_to_cancel(launcher: Launcher) -> None:
    finished = launcher.run(*_marker(2), "--run", timeout=180)
    assert finished.returncode == 0, finished.stdout[-2000:] + finished.stderr[-2000:]
    done = launcher.run("-m", "rlaunch", "cancel", RUN, "--yes", timeout=60)
    assert done.returncode == 0 and "nothing to cancel" in done.stdout and "succeeded" in done.stdout, done.stdout


def test_a_cancel_that_cannot_find_the_jobs_of_an_open_attempt_says_so_and_fails(
    launcher: Launcher, tmp_path: Path
) -> None:
    output = launcher.prefix / "marker" / "rl" / VERSION
    output.mkdir(parents=True)
    record = {"run_id": "r", "attempts": [{"attempt_id": "a1", "state": "launching", "backend": "local"}]}
    (output / "run_record.json").write_text(json.dumps(record))
    done = launcher.run("-m", "rlaunch", "cancel", RUN, "--yes", timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cannot cancel" in done.stderr and "a1" in done.stderr and "launching" in done.stderr, done.stderr
    assert "nothing to cancel" not in done.stdout
