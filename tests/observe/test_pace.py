"""The rate and ETA of a running attempt, from its logged (training step, time) points, at every edge:
no step, one, two, steps logged at one time, the final step already logged, no final step, several
lines per training step, a log that restarts, a window narrower than the log; and their text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlaunch.observe.pace import RATE_WINDOW, SAME_TIME, WAITING, Pace, pace, step_starts
from rlaunch.observe.render import duration, pace_lines

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


@pytest.mark.parametrize("points", [[], [(1, T0)], [(1, T0), (1, T0 + 5)]])
def test_no_rate_before_a_second_training_step(points: list[tuple[int, float]]) -> None:
    assert pace(points, 10) == Pace(waiting=WAITING)


def test_two_steps_give_the_rate_and_the_eta_from_the_last_steps_time() -> None:
    p = pace([(1, T0), (2, T0 + 30)], 10)
    assert (p.waiting, p.over_steps, p.seconds_per_step, p.steps_per_hour) == (None, 1, 30.0, 120.0)
    assert (p.remaining_steps, p.eta_seconds) == (8, 240.0)
    assert p.eta_at == "2027-01-15T08:04:30.000+00:00"  # the second step's time + 8 x 30 s


@pytest.mark.parametrize("later", [T0, T0 - 1])
def test_steps_logged_at_one_time_or_back_in_time_give_no_rate(later: float) -> None:
    assert pace([(1, T0), (2, later)], 10) == Pace(waiting=SAME_TIME)


@pytest.mark.parametrize("final", [3, 2])
def test_the_final_step_logged_leaves_nothing_to_go(final: int) -> None:
    p = pace([(1, T0), (2, T0 + 10), (3, T0 + 20)], final)
    assert (p.remaining_steps, p.eta_seconds, p.eta_at) == (0, 0.0, "2027-01-15T08:00:20.000+00:00")


def test_one_step_short_of_the_final_is_one_step_to_go() -> None:
    p = pace([(1, T0), (2, T0 + 10)], 3)
    assert (p.remaining_steps, p.eta_seconds) == (1, 10.0)


def test_without_a_final_step_there_is_a_rate_and_no_eta() -> None:
    p = pace([(1, T0), (2, T0 + 10)], None)
    assert p.seconds_per_step == 10.0 and (p.remaining_steps, p.eta_seconds, p.eta_at) == (None, None, None)


def test_a_training_step_of_several_logged_lines_is_timed_from_its_first_line() -> None:
    """Four optimizer steps per training step: the first line of each training step is one step apart."""
    points = [(1, T0), (1, T0 + 1), (1, T0 + 2), (1, T0 + 3), (2, T0 + 40), (2, T0 + 41)]
    assert step_starts(points) == [(1, T0), (2, T0 + 40)]
    p = pace(points, 5)
    assert (p.seconds_per_step, p.remaining_steps, p.eta_seconds) == (40.0, 3, 120.0)


def test_a_log_that_restarts_over_earlier_steps_counts_only_new_steps() -> None:
    assert step_starts([(1, T0), (2, T0 + 10), (1, T0 + 20), (3, T0 + 30)]) == [(1, T0), (2, T0 + 10), (3, T0 + 30)]


def test_steps_the_log_skips_count_in_the_rate() -> None:
    """A runtime that logs every fifth step: 5 steps in 50 s is 10 s a step."""
    p = pace([(5, T0), (10, T0 + 50)], 20)
    assert (p.over_steps, p.seconds_per_step, p.remaining_steps) == (5, 10.0, 10)


def test_the_rate_is_the_recent_windows_and_says_over_how_many_steps() -> None:
    slow = [(step, T0 + 100.0 * step) for step in range(1, 11)]
    fast = [(step, slow[-1][1] + 10.0 * (step - 10)) for step in range(11, 11 + RATE_WINDOW)]
    p = pace(slow + fast, 100)
    assert (p.over_steps, p.seconds_per_step) == (RATE_WINDOW, 10.0)
    assert pace(slow + fast, 100, window=RATE_WINDOW + 5).seconds_per_step == pytest.approx(600 / 15)  # steps 5 to 20


@given(
    first=st.integers(min_value=0, max_value=10_000),
    count=st.integers(min_value=2, max_value=60),
    seconds=st.floats(min_value=0.01, max_value=10_000),
    final=st.integers(min_value=0, max_value=20_000),
)
def test_steps_at_an_even_pace_give_that_pace_and_its_eta(first: int, count: int, seconds: float, final: int) -> None:
    points = [(first + i, T0 + i * seconds) for i in range(count)]
    p = pace(points, final)
    last = first + count - 1
    assert p.waiting is None and p.over_steps == min(count - 1, RATE_WINDOW)
    assert p.seconds_per_step == pytest.approx(seconds, rel=1e-4)  # times near 1.8e9 s keep ~7 digits
    assert p.steps_per_hour == pytest.approx(3600 / seconds, rel=1e-4)
    assert p.remaining_steps == max(final - last, 0)
    assert p.eta_seconds == pytest.approx(max(final - last, 0) * seconds, rel=1e-4)


# -- the text ---------------------------------------------------------------------------------------


def test_the_text_of_a_rate_and_its_eta() -> None:
    assert pace_lines(pace([(1, T0), (2, T0 + 30)], 10)) == [
        "rate       120 steps/h (30 s/step) over the last 1 step",
        "ETA        4m 00s, at 2027-01-15T08:04:30.000+00:00 (8 steps to go)",
    ]


@pytest.mark.parametrize(
    ("p", "says"),
    [
        (Pace(waiting=WAITING), ["rate       waiting for a second step"]),
        (pace([(1, T0), (2, T0 + 7200)], None), [
            "rate       0.5 steps/h (7200 s/step) over the last 1 step",
            "ETA        unknown: no final step configured (trainer.max_training_steps)",
        ]),
        (pace([(1, T0), (3, T0 + 0.5)], 3), [
            "rate       14400 steps/h (0.25 s/step) over the last 2 steps",
            "ETA        the final step is logged",
        ]),
    ],
)  # fmt: skip
def test_the_text_says_why_there_is_no_rate_or_eta(p: Pace, says: list[str]) -> None:
    assert pace_lines(p) == says


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (59.4, "59s"), (59.5, "1m 00s"), (3599, "59m 59s"), (3600, "1h 00m"), (86399, "23h 59m"),
     (86400, "1d 0h"), (90061, "1d 1h")],
)  # fmt: skip
def test_a_duration_is_its_two_largest_units(seconds: float, text: str) -> None:
    assert duration(seconds) == text
