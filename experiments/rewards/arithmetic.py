"""A reward for the smoke's sums, written by the experiment rather than built into a runtime.

A reward is `(completion, ground_truth) -> float`. It runs inside the trainer, in the runtime's own
environment, so it imports only what that environment holds (here: the standard library).
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"-?\d+")


def exact_sum(completion: str, ground_truth: str) -> float:
    """1.0 when the completion's first number is the sum, 0.1 when it holds a number at all, else 0."""
    numbers = _NUMBER.findall(completion)
    if not numbers:
        return 0.0
    return 1.0 if numbers[0] == ground_truth.strip() else 0.1
