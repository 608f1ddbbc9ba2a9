"""`wait_until`: the probe's first truthy answer, a timeout that names what was awaited, no overshoot."""

from __future__ import annotations

import time

import pytest

from rlaunch.waiting import WaitTimeout, wait_until


def test_returns_the_probes_first_truthy_answer() -> None:
    answers = iter([None, 0, "", {"exit_code": 0}])
    assert wait_until(lambda: next(answers), 5.0, "an outcome", 0.001) == {"exit_code": 0}


def test_a_wait_that_runs_out_names_what_it_waited_for() -> None:
    with pytest.raises(WaitTimeout, match=r"timed out after 0\.05s waiting for rank 0's head record") as info:
        wait_until(lambda: None, 0.05, "rank 0's head record", 0.01)
    assert isinstance(info.value, TimeoutError) and info.value.what == "rank 0's head record"


def test_the_probe_runs_at_the_deadline_and_no_pause_overshoots_it() -> None:
    looks: list[float] = []
    started = time.monotonic()

    def probe() -> bool:
        looks.append(time.monotonic() - started)
        return False

    with pytest.raises(WaitTimeout):
        wait_until(probe, 0.2, "nothing", 10.0)  # the pause is longer than the whole limit
    assert len(looks) == 2 and looks[1] >= 0.2  # once at the start, once at the deadline
    assert time.monotonic() - started < 2.0


def test_a_probe_ends_the_wait_by_raising() -> None:
    def probe() -> None:
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        wait_until(probe, None, "a stop", 0.01)


def test_the_pause_grows_up_to_its_ceiling(monkeypatch: pytest.MonkeyPatch) -> None:
    pauses: list[float] = []
    monkeypatch.setattr(time, "sleep", pauses.append)
    answers = iter([False] * 6 + [True])
    assert wait_until(lambda: next(answers), None, "jobs to end", 0.05, max_interval=0.1)
    assert pauses == pytest.approx([0.05, 0.075, 0.1, 0.1, 0.1, 0.1])
