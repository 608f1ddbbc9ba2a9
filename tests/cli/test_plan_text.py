"""The plan's GPU-hours of an RL step: its gang for its child job's time limit, or, without one,
for the coordinator's deadline (the most the child can run: the coordinator waits for it that long)."""

from __future__ import annotations

from rlaunch.cli.plan_text import step_gpu_hours, step_placement
from rlaunch.skyrl import skyrl_step
from tests.support import specs as h


def test_an_rl_step_without_a_child_timeout_is_charged_its_coordinators_deadline() -> None:
    step = skyrl_step(h.spec(), h.iris(job_timeout_seconds=0, coordinator_timeout_hours=1.5), export_hf=True)
    assert step_gpu_hours(step) == 64 * 1.5  # 8 nodes x 8 H100
    assert step_placement(step).endswith(", deadline 1.5h")


def test_an_rl_step_with_a_child_timeout_is_charged_that_timeout_not_the_deadline() -> None:
    step = skyrl_step(h.spec(), h.iris(job_timeout_seconds=1800, coordinator_timeout_hours=1.5), export_hf=True)
    assert step_gpu_hours(step) == 64 * 0.5
    assert step_placement(step).endswith(", limit 1800s")
