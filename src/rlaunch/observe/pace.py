"""How fast a running attempt trains, and when it should reach its final step.

Read from the times its trainer logged with each step (`metrics.jsonl`), in training steps: the
unit `trainer.max_training_steps` is configured in and both runtimes record on every line
(`training_step`; a line without one is a training step of its own). A runtime that takes several
optimizer steps per training step logs a line for each, so the first lines of two training steps in
a row are one training step apart, whatever the number of optimizer steps in it. The rate is measured over the most recent steps only (`RATE_WINDOW`), so
it follows a run that slows down or speeds up; the ETA is the steps left at that rate, counted from
the last step's time (no clock is read: the same log gives the same answer).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from rlaunch import storage

RATE_WINDOW = 10  # training steps the rate is measured over
WAITING = "waiting for a second step"
SAME_TIME = "the recent steps were logged at one time (or the clock went back): waiting for a later step"


@dataclass(frozen=True)
class Pace:
    """The rate of the recent steps and the ETA of the final one; `waiting` says why there is no rate."""

    waiting: str | None = None
    over_steps: int = 0  # training steps the rate spans
    seconds_per_step: float | None = None
    steps_per_hour: float | None = None
    remaining_steps: int | None = None  # None: the final step is not configured
    eta_seconds: float | None = None
    eta_at: str | None = None  # UTC, when the final step should be logged


def step_starts(points: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """(training step, time) of the first line of each training step, in log order; a line whose
    step is not past every one before it (a log restarted over earlier steps) is not a new step."""
    starts: list[tuple[int, float]] = []
    for step, at in points:
        if not starts or step > starts[-1][0]:
            starts.append((step, at))
    return starts


def pace(points: Sequence[tuple[int, float]], final_step: int | None, window: int = RATE_WINDOW) -> Pace:
    """The pace of the (training step, logged time) `points`, towards `final_step` (None: unknown)."""
    starts = step_starts(points)
    if len(starts) < 2:
        return Pace(waiting=WAITING)
    recent = starts[-(window + 1) :]
    (first_step, first_at), (last_step, last_at) = recent[0], recent[-1]
    if last_at <= first_at:
        return Pace(waiting=SAME_TIME)
    seconds = (last_at - first_at) / (last_step - first_step)
    rate = Pace(over_steps=last_step - first_step, seconds_per_step=seconds, steps_per_hour=3600.0 / seconds)
    if final_step is None:
        return rate
    remaining = max(final_step - last_step, 0)
    eta = remaining * seconds
    return dataclasses.replace(
        rate, remaining_steps=remaining, eta_seconds=eta, eta_at=storage.utc_from_epoch(last_at + eta)
    )
