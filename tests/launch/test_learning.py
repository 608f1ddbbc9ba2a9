"""RL learns, not only runs: the learning example's accuracy rises by more than its interval.

The e2e test runs `experiments.learning` for real (warm start, TRL GRPO through the trl-cpu
runtime, two evaluation step jobs) on its fixed seed; the numbers are in benchmarks/README.md.
A sign error in rewards or advantages drives the accuracy down, and the verdict says so.
"""

from __future__ import annotations

import argparse
import json
import re

import pytest

from experiments.learning import judge
from rlaunch.intervals import clustered_accuracy
from tests.support import file_modules
from tests.support.launchers import Launcher

pytestmark = pytest.mark.launch

VERSION = "2026.12.04"


def report(solved: list[int], model: str) -> dict[str, object]:
    """An evaluation of 200 prompts x 8 completions: the prompts at the indices in `solved` always
    right, the others never, as the evaluation step writes it."""
    scores = [[1.0 if i in solved else 0.0] * 8 for i in range(200)]
    return {**clustered_accuracy(scores).to_json(), "model": model, "data": "learning/arithmetic@v:d"}


@pytest.mark.parametrize(
    ("after", "learned"),
    [
        (list(range(110)), True),  # the 100 prompts before solved, and 10 more: paired, beyond the noise
        (list(range(10, 110)), False),  # 10 lost, 10 gained: the same accuracy
        (list(range(90)), False),  # fewer: beyond the noise, downwards
        (list(range(102)), False),  # 2 more: within the noise
    ],
    ids=["gained", "swapped", "lost", "within-noise"],
)
def test_the_verdict_says_learned_only_when_the_paired_lift_exceeds_its_interval_upwards(
    tmp_path, after: list[int], learned: bool
) -> None:
    config = {
        "output_path": str(tmp_path),
        "before": report(list(range(100)), "learning/sft@v:a"),
        "after": report(after, "learning/rl@v:b"),
    }
    verdict = judge(config)
    assert verdict.learned is learned and verdict.paired is True
    written = json.loads((tmp_path / "verdict.json").read_text())
    assert written["learned"] is learned and written["before_model"] == "learning/sft@v:a"
    assert written["verdict"].startswith(f"B - A = {verdict.lift:+.3f} [")


@pytest.mark.e2e
def test_rl_lifts_the_warm_started_models_accuracy_by_more_than_the_interval(launcher: Launcher) -> None:
    done = launcher.run("-m", "experiments.learning", "--version", VERSION, "--run", timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    prefix = launcher.prefix
    verdict = json.loads((prefix / "learning" / "verdict" / VERSION / "verdict.json").read_text())
    assert verdict["learned"] is True, verdict
    assert verdict["paired"] is True and verdict["lift_interval"][0] > 0, verdict
    # before scored the warm start, after the RL step's export, on the same rows
    before = json.loads((prefix / "learning" / "eval-before" / VERSION / "report.json").read_text())
    after = json.loads((prefix / "learning" / "eval-after" / VERSION / "report.json").read_text())
    assert before["model"].startswith(f"learning/sft@{VERSION}:") and after["model"].startswith(
        f"learning/rl@{VERSION}:"
    )
    assert before["data"] == after["data"] and before["n"] == after["n"] == 1600
    assert before["n_prompts"] == after["n_prompts"] == 200 and before["samples"] == 8
    compare = launcher.run(
        "-m", "rlaunch", "compare", f"learning/eval-before@{VERSION}", f"learning/eval-after@{VERSION}"
    )
    assert (
        compare.returncode == 0
        and ": exceeds the interval  (95 %, clustered by prompt; paired by prompt)" in compare.stdout
    )


benchmark = file_modules.load("benchmarks/learning.py", "learning_benchmark")


@pytest.mark.parametrize(
    ("token", "seeds"),
    [("3", [3]), ("10-19", list(range(10, 20))), ("4-4", [4])],
    ids=["one", "range", "range-of-one"],
)
def test_the_benchmark_takes_a_seed_or_an_inclusive_range(token: str, seeds: list[int]) -> None:
    assert benchmark.seeds_of(token) == seeds


@pytest.mark.parametrize("token", ["19-10", "10-", "-3", "10..19", "a"])
def test_the_benchmark_refuses_a_token_that_is_not_a_seed_or_an_increasing_range(token: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=f"--seeds '{re.escape(token)}': give a seed"):
        benchmark.seeds_of(token)
