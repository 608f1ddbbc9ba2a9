"""The phases of one attempt of the marker RL run, as its durable state shows them: the table the
cancel (test_cancel_phases) and kill -9 (test_kill9) fault tests share.

    coordinator submitted            the coordinator job exists; nothing need be recorded yet
    attempt recorded, no child yet   the coordinator recorded the attempt, the host no child job yet
    child recorded                   the host recorded its child job (the training gang)
    training                         the trainer logged its first step
"""

from __future__ import annotations

import json
from collections.abc import Callable

from tests.launching import Launcher


def latest_attempt(launcher: Launcher, version: str) -> dict:
    """The run record's latest attempt ({} before there is one)."""
    path = launcher.prefix / "marker" / "rl" / version / "run_record.json"
    attempts = (json.loads(path.read_text()) if path.exists() else {}).get("attempts") or [{}]
    return attempts[-1]


def trained_steps(launcher: Launcher, version: str) -> int:
    """How many steps the latest attempt's trainer has logged."""
    attempt_id = latest_attempt(launcher, version).get("attempt_id")
    metrics = list(launcher.prefix.glob(f".tmp/*/marker/rl/{version}/attempts/{attempt_id}/metrics.jsonl"))
    return len(metrics[0].read_text().splitlines()) if attempt_id and metrics else 0


PHASES: dict[str, Callable[[Launcher, str], bool]] = {
    "coordinator submitted": lambda launcher, version: True,
    "attempt recorded, no child yet": lambda launcher, version: (
        bool(latest_attempt(launcher, version).get("attempt_id"))
        and not latest_attempt(launcher, version).get("child_job_id")
    ),
    "child recorded": lambda launcher, version: bool(latest_attempt(launcher, version).get("child_job_id")),
    "training": lambda launcher, version: trained_steps(launcher, version) >= 1,
}
