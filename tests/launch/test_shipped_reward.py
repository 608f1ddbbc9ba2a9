"""The experiment's own reward reaches the trainer: `experiments.custom_reward` names a reward of a
module under tests/, ships it by identity, and the trl-cpu trainer scores every completion with it."""

from __future__ import annotations

import json
import os

import pytest

from tests.experiments.fixed_reward import SCORE
from tests.support.launchers import REPO, Launcher

pytestmark = pytest.mark.launch

VERSION = "2026.12.07"
REWARD = "tests.experiments.fixed_reward:three_eighths"
RUN = ("-m", "experiments.custom_reward", "--version", VERSION, "--stage", "rl", "--steps", "1", "--reward", REWARD)
CHECKOUT = {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])}  # every process runs this checkout


@pytest.mark.e2e
def test_the_trainer_scores_with_the_shipped_reward(launcher: Launcher) -> None:
    done = launcher.run(*RUN, "--run", timeout=1800, env=CHECKOUT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    rl = launcher.prefix / "custom-reward" / "rl" / VERSION
    (attempt,) = json.loads((rl / "run_record.json").read_text())["attempts"]
    assert attempt["state"] == "succeeded", attempt
    document = (launcher.prefix / attempt["launch_document_uri"].removeprefix(str(launcher.prefix) + "/")).read_text()
    (bundle,) = (launcher.prefix / ".code").iterdir()  # published by its digest, which the document names
    assert f"digest: {bundle.name}" in document and f"reward: {REWARD}" in document, document
    assert sorted(json.loads((bundle / "code.json").read_text())["files"]) == [
        "tests/__init__.py",
        "tests/experiments/__init__.py",
        "tests/experiments/fixed_reward.py",
    ]
    logs = launcher.run("-m", "rlaunch", "logs", f"custom-reward/rl@{VERSION}", env=CHECKOUT)
    assert logs.returncode == 0, logs.stderr[-2000:]
    assert (
        f"reward: {REWARD} from " in logs.stdout and "/shipped-code/tests/experiments/fixed_reward.py" in logs.stdout
    ), logs.stdout[-3000:]
    (metrics,) = launcher.prefix.glob(f".tmp/ttl=*/custom-reward/rl/{VERSION}/attempts/*/metrics.jsonl")
    means = [json.loads(line)["reward_mean"] for line in metrics.read_text().splitlines()]
    assert means == [pytest.approx(SCORE)], means  # no built-in reward scores every completion 0.375
