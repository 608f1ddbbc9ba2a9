"""Gate 7, failures classified: a failed attempt is deterministic (fix the inputs) or operational
(resubmit with --retry), decided from exit codes, signals and log signatures, with the evidence
line, in the run record and in `rlaunch status`."""

from __future__ import annotations

import json

import pytest

from rlaunch.launch_config.failures import DETERMINISTIC, OPERATIONAL, UNCLASSIFIED, classify
from tests.support.launchers import Launcher

DAY = "2026.11.30"


def _attempt(launcher: Launcher) -> dict:
    (attempt,) = json.loads((launcher.prefix / "marker/rl" / DAY / "run_record.json").read_text())["attempts"]
    return attempt


def _status_line(launcher: Launcher) -> list[str]:
    done = launcher.run("-m", "rlaunch", "status", f"marker/rl@{DAY}")
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("failed as"))
    return lines[start : start + 2]


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("scenario", "kind", "cause", "evidence", "head"),
    [
        (
            "missing_module",
            DETERMINISTIC,
            "runtime import error",
            "ModuleNotFoundError: No module named 'rlaunch_marker_missing_dependency'",
            "deterministic: runtime import error; fix the inputs",
        ),
        (
            "sigkill_at_2",
            OPERATIONAL,
            "killed for memory",
            "exit code -9",
            'operational: killed for memory; resubmit with --retry "<reason>"',
        ),
    ],
)
def test_a_failed_trainer_is_classified_in_the_record_and_in_status(
    launcher: Launcher, scenario: str, kind: str, cause: str, evidence: str, head: str
) -> None:
    failed = launcher.run("-m", "tests.experiments.marker", "--version", DAY, "--scenario", scenario, "--run")
    assert failed.returncode != 0
    found = _attempt(launcher)["failure_class"]
    assert (found["kind"], found["cause"]) == (kind, cause)
    assert found["evidence"].startswith(evidence)
    shown_head, shown_evidence = _status_line(launcher)
    assert head in shown_head and shown_evidence.split() == ["evidence:", *found["evidence"].split()]


@pytest.mark.parametrize(
    ("lines", "codes", "kind", "cause", "rule"),
    [
        (
            ["RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1296, unhandled system error"],
            [1],
            OPERATIONAL,
            "collective-communication failure",
            None,
        ),
        (
            ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"],
            [1],
            OPERATIONAL,
            "killed for memory",
            None,
        ),
        (["task 3 was preempted by a higher-priority job"], [143], OPERATIONAL, "preempted", None),
        (["ray.exceptions.ActorDiedError: The actor died unexpectedly"], [1], OPERATIONAL, "node lost", None),
        (
            ["requests.exceptions.ConnectionError: Max retries exceeded with url: /api"],
            [1],
            OPERATIONAL,
            "service unreachable",
            None,
        ),
        (
            ["AssertionError: train_batch_size 250 must be divisible by policy_mini_batch_size 64"],
            [1],
            DETERMINISTIC,
            "geometry or batch assertion",
            "batch.train_mini",
        ),
        (["KeyError: 'prompt'"], [1], DETERMINISTIC, "data-format error", None),
        (["ModuleNotFoundError: No module named 'flash_attn'"], [1], DETERMINISTIC, "runtime import error", None),
        ([], [-9], OPERATIONAL, "killed for memory", None),
        ([], [143], OPERATIONAL, "preempted", None),
        ([], [124], OPERATIONAL, "timed out", None),
        (["nothing we know"], [1], UNCLASSIFIED, "no known signature", None),
    ],
)
def test_signatures_and_exit_codes(lines: list[str], codes: list[int], kind: str, cause: str, rule: str | None) -> None:
    found = classify("child job x reached failed", ["[rank 0] starting", *lines], codes)
    assert (found.kind, found.cause, found.rule) == (kind, cause, rule)
    if lines and kind != UNCLASSIFIED:
        assert found.evidence == lines[-1]


def test_the_line_nearest_the_end_decides_and_a_refusal_names_its_rule() -> None:
    found = classify("x", ["ModuleNotFoundError: No module named 'a'", "torch.OutOfMemoryError: CUDA out of memory"])
    assert found.cause == "killed for memory"
    refused = classify("1 violation: [batch.train_mini] ...", refused=True, rule_codes=["batch.train_mini"])
    assert (refused.kind, refused.rule) == (DETERMINISTIC, "batch.train_mini")


@pytest.mark.parametrize(
    ("line", "where"),
    [
        ("step 12: loss=nan", "step 12"),
        ("global_step 7 loss: inf", "step 7"),
        ("grad_norm: -inf at step 3", "step 3"),
        ("RuntimeError: Loss is not finite", None),
        ("non-finite loss, stopping", None),
    ],
)
def test_a_nan_or_inf_loss_is_a_numerical_failure_at_its_step(line: str, where: str | None) -> None:
    found = classify("exit code 1", [line])
    assert (found.kind, found.cause, found.where) == ("numerical", "non-finite loss", where)
    assert found.advice.startswith("training diverged: lower the learning rate")


@pytest.mark.parametrize("line", ["loss: 0.41 info: nanny process up", "infra lost", "loss=0.12 (inference)"])
def test_a_finite_loss_next_to_nan_like_words_is_not_numerical(line: str) -> None:
    assert classify("exit code 1", [line]).kind != "numerical"


@pytest.mark.parametrize(
    ("refusal", "kind", "cause"),
    [
        (
            "credentials: trainer.logger is 'wandb', which needs WANDB_API_KEY",
            "environment",
            "refused before allocation: credentials",
        ),
        ("storage: /p is not writable", "environment", "refused before allocation: storage"),
        ("backend: the iris backend needs Python >= 3.12", "environment", "refused before allocation: backend"),
        ('retry: the latest attempt a1 failed; pass --retry "<reason>"', "gate", "retry"),
        ("large: it is declared a smoke (is_smoke=True), yet", "gate", "large"),
        ("resume: resume_from pins", "gate", "resume"),
    ],
)
def test_a_refusal_before_allocation_is_classed_by_its_gate(refusal: str, kind: str, cause: str) -> None:
    found = classify(refusal, refused=True)
    assert (found.kind, found.cause) == (kind, cause)
    if kind == "gate":  # the gate's own remedy, not "fix the recipe"
        assert "fix the inputs" not in found.advice and found.advice != ""


def test_a_refusal_by_a_rule_stays_deterministic_with_its_code() -> None:
    found = classify("retry: looks like a gate but a rule refused it", refused=True, rule_codes=["batch.train_mini"])
    assert (found.kind, found.rule) == ("deterministic", "batch.train_mini")
