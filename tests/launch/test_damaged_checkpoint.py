"""A damaged checkpoint is never resumed: its manifest's sizes and sha256s are checked first.

A run fails at step 6 (`flaky_at_6`: only an attempt that did not resume fails) after committing checkpoints at steps 2 and 4 (each with its files' sizes
and sha256 in `rlaunch_checkpoint.json`, written as the checkpoint is written). The latest
checkpoint's weights are then truncated, as a crash mid-copy or a failing disk leaves them. The
authorised retry must resume step 2, the newest checkpoint that verifies, and say so; with every
checkpoint damaged it must refuse, naming each and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.launchers import Launcher

pytestmark = pytest.mark.launch

VERSION = "2026.12.07"
MARKER = ("-m", "tests.experiments.marker", "--version", VERSION, "--steps", "6")


def _checkpoints(launcher: Launcher) -> Path:
    return next(launcher.prefix.glob(f".tmp/*/marker/rl/{VERSION}/checkpoints"))


def _truncate(checkpoint: Path) -> None:
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:10])


def _attempts(launcher: Launcher) -> list[dict]:
    return json.loads((launcher.prefix / "marker/rl" / VERSION / "run_record.json").read_text())["attempts"]


def _first_step(launcher: Launcher, attempt_id: str) -> int:
    metrics = next(launcher.prefix.glob(f".tmp/*/marker/rl/{VERSION}/attempts/{attempt_id}/metrics.jsonl"))
    return json.loads(metrics.read_text().splitlines()[0])["step"]


def test_a_truncated_latest_checkpoint_is_skipped_and_the_retry_resumes_the_previous_good_one(
    launcher: Launcher,
) -> None:
    failed = launcher.run(*MARKER, "--scenario", "flaky_at_6", "--run")
    assert failed.returncode != 0
    root = _checkpoints(launcher)
    manifest = json.loads((root / "global_step_4" / "rlaunch_checkpoint.json").read_text())
    assert (
        manifest["files"]["model.safetensors"]["size"] > 10
        and len(manifest["files"]["model.safetensors"]["sha256"]) == 64
    )
    _truncate(root / "global_step_4")
    plan = launcher.run(*MARKER, "--scenario", "flaky_at_6")
    assert "would resume step 4" in plan.stdout and "step 2 would be resumed instead" in plan.stdout, plan.stdout
    assert "global_step_4: model.safetensors has 10 bytes" in plan.stdout, plan.stdout

    retried = launcher.run(*MARKER, "--scenario", "flaky_at_6", "--run", "--retry", "the trainer failed at step 6")
    output = retried.stdout + retried.stderr
    assert retried.returncode == 0, output[-3000:]
    assert "global_step_4" in output and "model.safetensors" in output, output[-3000:]  # says what it skipped
    assert "resuming step 2" in output, output[-3000:]
    latest = _attempts(launcher)[-1]
    assert latest["state"] == "succeeded" and _first_step(launcher, latest["attempt_id"]) == 3, latest
    assert latest["resume"]["step"] == 2 and "global_step_4" in latest["resume"]["skipped"][0], latest["resume"]


def test_with_every_checkpoint_damaged_the_retry_refuses_naming_each(launcher: Launcher) -> None:
    failed = launcher.run(*MARKER, "--scenario", "flaky_at_6", "--run")
    assert failed.returncode != 0
    root = _checkpoints(launcher)
    for step in (2, 4):
        _truncate(root / f"global_step_{step}")

    refused = launcher.run(*MARKER, "--scenario", "flaky_at_6", "--run", "--retry", "the trainer failed at step 6")
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0, output[-3000:]
    assert "global_step_2" in output and "global_step_4" in output and "resume_mode" in output, output[-3000:]
    assert _attempts(launcher)[-1]["state"] == "failed"
