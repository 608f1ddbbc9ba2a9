"""RL learns, not only runs: the learning example's accuracy rises by more than its interval.

The e2e test runs `experiments.learning` for real (warm start, TRL GRPO through the trl-cpu
runtime, two evaluation step jobs) on its fixed seed; the numbers are in benchmarks/README.md.
A sign error in rewards or advantages drives the accuracy down, and the verdict says so.
"""

from __future__ import annotations

import json

import pytest

from experiments.learning import judge
from tests.launching import Launcher

pytestmark = pytest.mark.launch

VERSION = "2026.12.04"


def report(accuracy: float, interval: tuple[float, float], model: str) -> dict[str, object]:
    return {"accuracy": accuracy, "accuracy_interval": list(interval), "n": 1600, "model": model}


@pytest.mark.parametrize(
    ("after_interval", "learned"),
    [((0.66, 0.70), True), ((0.65, 0.70), False), ((0.60, 0.70), False)],
    ids=["above", "touching", "overlapping"],
)
def test_the_verdict_says_learned_only_when_after_lies_wholly_above_before(
    tmp_path, after_interval: tuple[float, float], learned: bool
) -> None:
    config = {
        "output_path": str(tmp_path),
        "before": report(0.62, (0.60, 0.65), "learning/sft@v:a"),
        "after": report(0.68, after_interval, "learning/rl@v:b"),
    }
    verdict = judge(config)
    assert verdict.learned is learned
    written = json.loads((tmp_path / "verdict.json").read_text())
    assert written["learned"] is learned and written["before_model"] == "learning/sft@v:a"


@pytest.mark.e2e
def test_rl_lifts_the_warm_started_models_accuracy_by_more_than_the_interval(launcher: Launcher) -> None:
    done = launcher.run("-m", "experiments.learning", "--version", VERSION, "--run", timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    prefix = launcher.prefix
    verdict = json.loads((prefix / "learning" / "verdict" / VERSION / "verdict.json").read_text())
    assert verdict["learned"] is True, verdict
    assert verdict["after_interval"][0] > verdict["before_interval"][1], verdict
    # before scored the warm start, after the RL step's export, on the same rows
    before = json.loads((prefix / "learning" / "eval-before" / VERSION / "report.json").read_text())
    after = json.loads((prefix / "learning" / "eval-after" / VERSION / "report.json").read_text())
    assert before["model"].startswith(f"learning/sft@{VERSION}:") and after["model"].startswith(
        f"learning/rl@{VERSION}:"
    )
    assert before["data"] == after["data"] and before["n"] == after["n"] == 1600
