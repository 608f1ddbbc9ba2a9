"""The phases of one attempt of the marker RL run, as its durable state shows them: the table the
cancel (test_cancel_phases) and kill -9 (test_kill9) fault tests share.

    coordinator submitted            the coordinator job exists; nothing need be recorded yet
    attempt recorded, no child yet   the coordinator recorded the attempt, the host no child job yet
    child recorded                   the host recorded its child job (the training gang)
    training                         the trainer logged its first step

Two more phases last long enough to be seen only when the run is made slow there (`SLOW_PHASES`,
with the marker options that make it so), and are cancelled at but not killed at:

    staging                          the child copies the model's files (a model of many shards)
    exporting                        the trainer wrote the export's config, not yet its weights
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.support.launchers import Launcher


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


def child_job(launcher: Launcher) -> Path | None:
    """The child gang's job directory on the local backend (the job with a parent), once it exists."""
    for job in sorted(launcher.prefix.glob(".jobs/*/job.json")):
        try:
            if json.loads(job.read_text()).get("parent"):
                return job.parent
        except ValueError:  # being written
            continue
    return None


def replica_pid(job: Path) -> int | None:
    """The job's first replica's pid, once its supervisor recorded it."""
    try:
        return (json.loads((job / "state.json").read_text()).get("replicas") or [{}])[0].get("pid")
    except (OSError, ValueError):
        return None


def staging_copies(launcher: Launcher) -> list[Path]:
    """The model copies a child has under way: the temporary directory staging fills and renames."""
    return list(launcher.prefix.glob("_staging/*/*/replica-*/models/*.staging-*"))


def exporting(launcher: Launcher) -> bool:
    """An export's config is written and its weights not yet."""
    return any(not (c.parent / "model.safetensors").exists() for c in launcher.prefix.rglob("policy/config.json"))


SLOW_PHASES: dict[str, tuple[tuple[str, ...], Callable[[Launcher, str], bool]]] = {
    "staging": (("--model-shards", "6000"), lambda launcher, version: bool(staging_copies(launcher))),
    "exporting": (("--scenario", "slow_export", "--steps", "2"), lambda launcher, version: exporting(launcher)),
}
