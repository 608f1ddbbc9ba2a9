"""The plan's GPU-hours of an RL step: its gang for its child job's time limit, or, without one,
for the coordinator's deadline (the most the child can run: the coordinator waits for it that long)."""

from __future__ import annotations

import pytest

from rlaunch.cli.plan_text import step_gpu_hours, step_placement
from rlaunch.skyrl import skyrl_step
from tests.support import specs as h


@pytest.mark.parametrize(
    ("job_timeout_seconds", "gpu_hours", "placement"),
    [(0, 64 * 1.5, ", deadline 1.5h"), (1800, 64 * 0.5, ", limit 1800s")],
    ids=["without-a-child-timeout-its-coordinators-deadline", "with-a-child-timeout-that-timeout-not-the-deadline"],
)
def test_an_rl_step_is_charged_its_child_timeout_or_else_its_coordinators_deadline(
    job_timeout_seconds: int, gpu_hours: float, placement: str
) -> None:
    execution = h.iris(job_timeout_seconds=job_timeout_seconds, coordinator_timeout_hours=1.5)
    step = skyrl_step(h.spec(), execution, export_hf=True)
    assert step_gpu_hours(step) == gpu_hours  # 8 nodes x 8 H100
    assert step_placement(step).endswith(placement)
