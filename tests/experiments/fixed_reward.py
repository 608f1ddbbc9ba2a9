"""A reward no runtime builds in: every completion scores 0.375, so a run's metrics show whether the
trainer called it (`experiments.custom_reward --reward tests.experiments.fixed_reward:three_eighths`)."""

from __future__ import annotations

SCORE = 0.375


def three_eighths(completion: str, ground_truth: str) -> float:
    return SCORE
