"""Gate 7, failures classified: a failed attempt is deterministic (fix the inputs) or operational
(resubmit with --retry), decided from exit codes, signals and log signatures, with the evidence
line, in the run record and in `rlaunch status`."""

from __future__ import annotations

import json

import pytest

from rlaunch.launch_config.failures import DETERMINISTIC, OPERATIONAL, UNCLASSIFIED, classify
from tests.launching import Launcher

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
