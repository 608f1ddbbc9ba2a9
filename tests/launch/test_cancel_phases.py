"""`rlaunch cancel` works at every moment of an attempt.

A run is launched (detached) and cancelled at each phase boundary (`attempt_phases`, the table the
kill -9 tests share), looked for in its durable state:
the coordinator submitted and nothing recorded yet; the attempt recorded by the coordinator but
no child job recorded by the host yet (the window where a cancel used to answer "nothing to
cancel" while both jobs ran on); the child recorded; training. Each cancel must stop every job of
the run and leave the record saying so; after the run finished, a cancel says there is nothing to
cancel. A cancel that cannot act (the attempt is open but its jobs cannot be found) says so and
exits non-zero.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.launch.attempt_phases import PHASES, latest_attempt
from tests.launching import Launcher
from tests.polling import wait_for

pytestmark = pytest.mark.launch

VERSION = "2026.12.06"
RUN = f"marker/rl@{VERSION}"


def _marker(steps: int) -> tuple[str, ...]:
    return ("-m", "tests.experiments.marker", "--version", VERSION, "--scenario", "slow", "--steps", str(steps))


@pytest.mark.parametrize("phase", list(PHASES))
def test_a_cancel_at_each_phase_stops_every_job_of_the_run(launcher: Launcher, phase: str) -> None:
    submitted = launcher.run(*_marker(200), "--run", "--detach", timeout=120)
    assert submitted.returncode == 0, submitted.stdout[-2000:] + submitted.stderr[-2000:]
    wait_for(lambda: PHASES[phase](launcher, VERSION), 90, phase, interval=0.02)

    done = launcher.run("-m", "rlaunch", "cancel", RUN, "--yes", "--reason", f"at {phase}", timeout=120)
    assert done.returncode == 0 and ": cancelled (" in done.stdout, done.stdout + done.stderr
    backend = launcher.backend()
    wait_for(lambda: all(j.state.terminal for j in backend.list_jobs()), 60, "every job of the run to end")
    jobs = backend.list_jobs()
    assert jobs and all(j.state.value == "cancelled" for j in jobs), [(j.job_id, j.state.value) for j in jobs]
    attempt = latest_attempt(launcher, VERSION)
    if attempt.get("attempt_id"):  # an attempt the cancel knew of says who cancelled it
        assert attempt["state"] == "cancelled" and attempt["cancelled"]["reason"] == f"at {phase}", attempt


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
