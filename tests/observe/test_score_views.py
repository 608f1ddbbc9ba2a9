"""`rlaunch status` of an evaluation shows its score; `rlaunch compare A B` sets two side by side.

The evaluations are written by hand under a temporary prefix with the layout the evaluation step
writes: its run record (a step job's attempt), its artifact status and `report.json`.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rlaunch.artifacts import records
from rlaunch.cli.admin import main
from rlaunch.intervals import Accuracy, clustered_accuracy
from rlaunch.runs import run_record

V = "2026.12.04"
DATA = f"learning/arithmetic@{V}:d1"
SAMPLING = {"temperature": 1.0, "samples": 8, "max_new_tokens": 8, "seed": 0}


def solved(right: int, prompts: int = 200, samples: int = 8) -> list[list[float]]:
    """`right` prompts always solved, the rest never, `samples` completions each."""
    return [[1.0] * samples] * right + [[0.0] * samples] * (prompts - right)


def artifact(prefix: pathlib.Path, identity: str) -> str:
    name, version = identity.split("@")
    path = str(prefix / name / version)
    records.write_status(path, "succeeded", identity=identity, fingerprint="f")
    return path


def evaluation(prefix: pathlib.Path, identity: str, model: str, scores: list[list[float]], **report: Any) -> Accuracy:
    """An evaluation step job that scored `model`, as the step leaves it."""
    path = artifact(prefix, identity)
    run_record.update_attempt(path, "run-1", "a1", {"artifact": identity, "kind": "step", "state": "succeeded"})
    found = clustered_accuracy(scores)
    written = {**found.to_json(), "scorer": "arithmetic", "sampling": SAMPLING, "model": model, "data": DATA}
    (pathlib.Path(path) / "report.json").write_text(json.dumps({**written, **report}))
    return found


def rlaunch(prefix: pathlib.Path, *args: str) -> Result:
    return CliRunner().invoke(main, [*args, "--prefix", str(prefix)], catch_exceptions=False)


def test_status_of_an_evaluation_prints_its_accuracy_and_interval(tmp_path: pathlib.Path) -> None:
    found = evaluation(tmp_path, f"learning/eval-after@{V}", f"learning/rl@{V}:r1", solved(80))
    out = rlaunch(tmp_path, "status", f"learning/eval-after@{V}").output
    headline = (
        f"accuracy 0.400 [{found.low:.3f}, {found.high:.3f}] "
        "(95 %, clustered by prompt; n=1600 completions over 200 prompts)"
    )
    assert f"score        {headline}\n" in out
    assert "scorer arithmetic; temperature 1.0, 8 per prompt, at most 8 tokens, seed 0" in out
    assert f"model learning/rl@{V}:r1" in out and f"data {DATA}" in out
    shown = json.loads(rlaunch(tmp_path, "status", f"learning/eval-after@{V}", "--json").output)["score"]
    assert shown["headline"] == headline
    assert (shown["accuracy"]["n"], shown["accuracy"]["n_prompts"], shown["model"]) == (
        1600,
        200,
        f"learning/rl@{V}:r1",
    )


def test_status_of_a_step_without_a_report_shows_no_score(tmp_path: pathlib.Path) -> None:
    evaluation(tmp_path, f"learning/eval-after@{V}", f"learning/rl@{V}:r1", solved(80))
    (tmp_path / "learning" / "eval-after" / V / "report.json").unlink()
    out = rlaunch(tmp_path, "status", f"learning/eval-after@{V}").output
    assert "state        succeeded" in out and "score" not in out and "accuracy" not in out


def test_status_of_an_older_report_says_it_has_no_clustered_interval(tmp_path: pathlib.Path) -> None:
    path = artifact(tmp_path, f"smoke/eval@{V}")
    run_record.update_attempt(
        path, "run-1", "a1", {"artifact": f"smoke/eval@{V}", "kind": "step", "state": "succeeded"}
    )
    older = {"accuracy": 0.25, "accuracy_interval": [0.1, 0.5], "n": 16, "model": "m", "data": "d"}  # no n_prompts
    (pathlib.Path(path) / "report.json").write_text(json.dumps(older))
    out = rlaunch(tmp_path, "status", f"smoke/eval@{V}").output
    assert "accuracy 0.250 (no interval clustered by prompt in " in out and "run the evaluation again" in out


def learning(prefix: pathlib.Path, before: int = 90, after: int = 100) -> tuple[Accuracy, Accuracy]:
    """The learning example's two evaluations: B solves every prompt A solves, and more."""
    artifact(prefix, f"learning/sft@{V}")
    artifact(prefix, f"learning/rl@{V}")
    return (
        evaluation(prefix, f"learning/eval-before@{V}", f"learning/sft@{V}:s1", solved(before)),
        evaluation(prefix, f"learning/eval-after@{V}", f"learning/rl@{V}:r1", solved(after)),
    )


def test_compare_prints_the_learning_examples_before_and_after_with_the_verdict(tmp_path: pathlib.Path) -> None:
    a, b = learning(tmp_path)
    done = rlaunch(tmp_path, "compare", f"learning/eval-before@{V}", f"learning/eval-after@{V}")
    assert done.exit_code == 0, done.output
    rows = {line.split()[0]: line.split(maxsplit=1)[1] for line in done.output.splitlines() if line.strip()}
    assert rows["evaluation"].split() == [f"learning/eval-before@{V}", f"learning/eval-after@{V}"]
    assert " ".join(rows["accuracy"].split()) == f"0.450 [{a.low:.3f}, {a.high:.3f}] 0.500 [{b.low:.3f}, {b.high:.3f}]"
    assert rows["model"].split() == [f"learning/sft@{V}:s1", f"learning/rl@{V}:r1"]
    # paired, the ten prompts B gained are the whole difference: it exceeds the interval
    verdict = [line for line in done.output.splitlines() if line.startswith("B - A")]
    assert verdict == [
        "B - A = +0.050 [+0.020, +0.080]: exceeds the interval  (95 %, clustered by prompt; paired by prompt)"
    ]
    assert "note:" not in done.output


def test_compare_of_two_rl_versions_finds_each_ones_evaluation(tmp_path: pathlib.Path) -> None:
    learning(tmp_path)
    done = rlaunch(tmp_path, "compare", f"learning/sft@{V}", f"learning/rl@{V}", "--json")
    assert done.exit_code == 0, done.output
    shown = json.loads(done.output)
    assert (shown["a"]["evaluation"], shown["b"]["evaluation"]) == (
        f"learning/eval-before@{V}",
        f"learning/eval-after@{V}",
    )
    assert shown["difference"]["paired"] is True and shown["verdict"].endswith(": exceeds the interval")


def test_other_data_is_compared_unpaired_and_said(tmp_path: pathlib.Path) -> None:
    artifact(tmp_path, f"learning/rl@{V}")
    evaluation(tmp_path, f"eval/a@{V}", f"learning/rl@{V}:r1", solved(90))
    evaluation(tmp_path, f"eval/b@{V}", f"learning/rl@{V}:r1", solved(100), data=f"other/data@{V}:o")
    out = rlaunch(tmp_path, "compare", f"eval/a@{V}", f"eval/b@{V}").output
    assert "note: A and B differ in data, not only in the model" in out
    assert ": within noise  (95 %, clustered by prompt; unpaired: not the same prompts" in out


def test_an_rl_version_with_two_evaluations_must_be_named_by_its_evaluation(tmp_path: pathlib.Path) -> None:
    learning(tmp_path)
    evaluation(tmp_path, f"learning/eval-again@{V}", f"learning/rl@{V}:r1", solved(95))
    done = CliRunner().invoke(main, ["compare", f"learning/sft@{V}", f"learning/rl@{V}", "--prefix", str(tmp_path)])
    assert done.exit_code != 0
    assert f"learning/rl@{V} is not an evaluation, and 2 evaluations under" in done.output
    assert f"learning/eval-after@{V}" in done.output and f"learning/eval-again@{V}" in done.output


@pytest.mark.parametrize("model", [f"learning/rl@{V}", f"learning/rl@{V}x:r1"], ids=["no-fingerprint", "other-version"])
def test_an_evaluation_is_found_only_by_the_whole_identity_of_its_model(tmp_path: pathlib.Path, model: str) -> None:
    learning(tmp_path)
    report = tmp_path / "learning" / "eval-after" / V / "report.json"
    report.write_text(json.dumps({**json.loads(report.read_text()), "model": model}))
    done = CliRunner().invoke(main, ["compare", f"learning/sft@{V}", f"learning/rl@{V}", "--prefix", str(tmp_path)])
    assert done.exit_code != 0 and "0 evaluations under" in done.output


def test_an_older_report_is_refused_by_compare_with_its_fix(tmp_path: pathlib.Path) -> None:
    learning(tmp_path)
    report = tmp_path / "learning" / "eval-before" / V / "report.json"
    older = {k: v for k, v in json.loads(report.read_text()).items() if k != "n_prompts"}
    report.write_text(json.dumps(older))
    done = CliRunner().invoke(
        main, ["compare", f"learning/eval-before@{V}", f"learning/eval-after@{V}", "--prefix", str(tmp_path)]
    )
    assert done.exit_code != 0
    assert f"{report} has no interval clustered by prompt (an older report); run that evaluation again" in done.output
