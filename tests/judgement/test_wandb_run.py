"""Gate 8, the W&B run recorded: the run record holds the W&B run the trainer actually used, from
the runtime's evidence (`wandb.json`; the SkyRL adapter writes it from `wandb.run`, checked by the
contract tier), and `rlaunch status` shows it; offline, the run directory."""

from __future__ import annotations

import json

import pytest

from tests.support.launchers import Launcher

pytestmark = pytest.mark.e2e
DAY = "2026.11.30"


def test_the_wandb_run_the_trainer_used_is_in_the_run_record_and_status(launcher: Launcher) -> None:
    done = launcher.run("-m", "tests.experiments.marker", "--version", DAY, "--scenario", "wandb_offline", "--run")
    assert done.returncode == 0, done.stderr[-3000:]
    (attempt,) = json.loads((launcher.prefix / "marker/rl" / DAY / "run_record.json").read_text())["attempts"]
    wandb = attempt["wandb"]
    assert wandb["mode"] == "offline" and wandb["url"] is None and len(wandb["run_id"]) == 8
    assert f"/attempts/{attempt['attempt_id']}/wandb/offline-run-{wandb['run_id']}" in wandb["offline_dir"]
    status = launcher.run("-m", "rlaunch", "status", f"marker/rl@{DAY}")
    lines = status.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("W&B "))
    assert f"run {wandb['run_id']}" in lines[start]
    assert lines[start + 1].strip() == f"offline run directory {wandb['offline_dir']}"
    shown = json.loads(launcher.run("-m", "rlaunch", "status", f"marker/rl@{DAY}", "--json").stdout)
    assert shown["wandb"] == wandb
