"""A failure class at its edges, in process: what decides (a refusal, then the log's last matching
line, then exit codes and signals at their bounds, then the message), what is kept as evidence
(the first line, the last 300 characters), where it happened, the one-line summary and the JSON a
run record keeps and reads back (a damaged or foreign entry is none).
"""

from __future__ import annotations

import pytest

from rlaunch.launch_config.failures import (
    ADVICE,
    DETERMINISTIC,
    NEXT_STEPS,
    OPERATIONAL,
    UNCLASSIFIED,
    FailureClass,
    classify,
    disk_full,
    told,
)


def test_a_refusal_keeps_its_first_line_and_first_rule() -> None:
    found = classify("x" * 310 + "\nsecond", ["NCCL error"], [137], refused=True, rule_codes=["batch.a", "batch.b"])
    assert found == FailureClass(DETERMINISTIC, "refused before allocation", "x" * 300, "batch.a")
    assert classify(None, refused=True) == FailureClass(DETERMINISTIC, "refused before allocation", "", None)
    assert classify("", refused=True, rule_codes=["r"]).evidence == ""


def test_the_last_matching_log_line_decides_and_blank_lines_are_skipped() -> None:
    lines = ["ModuleNotFoundError: No module named 'x'", "NCCL watchdog timeout   ", "   ", "plain line"]
    found = classify("ImportError: y", lines, [1])
    assert (found.kind, found.cause, found.evidence) == (
        OPERATIONAL,
        "collective-communication failure",
        "NCCL watchdog timeout",
    )
    long = "No space left on device " + "y" * 400
    assert classify(None, [long]).evidence == long[-300:]


@pytest.mark.parametrize(
    ("codes", "cause", "evidence"),
    [
        ([0, -9], "killed for memory", "exit code -9: node lost or killed for memory (SIGKILL)"),
        ([None, 137], "killed for memory", "exit code 137: node lost or killed for memory (SIGKILL)"),
        ([143], "preempted", "exit code 143: terminated (SIGTERM)"),
        ([-15], "preempted", "exit code -15: terminated (SIGTERM)"),
        ([124], "timed out", "exit code 124: the time limit ended it"),
        ([1, 124, 137], "timed out", "exit code 124: the time limit ended it"),  # the first code that says
    ],
)
def test_exit_codes_and_signals_name_the_machinery(codes: list[int | None], cause: str, evidence: str) -> None:
    assert classify("it failed", [], codes) == FailureClass(OPERATIONAL, cause, evidence)


@pytest.mark.parametrize("code", [1, 2, 128, 129, 137 + 23, 160, 9, 15, -2])
def test_other_exit_codes_say_nothing(code: int) -> None:
    """128 + N only within 129..159 is a signal; a plain 9 or 15 is an exit status; -2 is SIGINT."""
    assert classify("it failed", [], [code]) == FailureClass(UNCLASSIFIED, "no known signature", "it failed")


def test_the_message_is_read_last_and_an_unknown_one_is_kept_whole_to_its_first_line() -> None:
    found = classify("first line\nCUDA out of memory on node(s) gpu-7 now", [], [1])
    assert (found.cause, found.evidence, found.where) == (
        "killed for memory",
        "CUDA out of memory on node(s) gpu-7 now",
        "gpu-7",
    )
    unknown = classify("z" * 320 + "\nmore", ["nothing here"], [1])
    assert unknown == FailureClass(UNCLASSIFIED, "no known signature", "z" * 300)
    assert classify(None) == FailureClass(UNCLASSIFIED, "no known signature", "")


def test_where_is_the_first_group_that_matched() -> None:
    found = classify("child job 7 reached failed: supervisor received SIGTERM (cancelled by me@login-2 (pid 12)")
    assert (found.cause, found.where) == ("cancelled by the scheduler", "login-2")
    assert classify("the Slurm job ended (CANCELLED, reason None) on node(s) n-[1-2] before").where == "n-[1-2]"
    assert classify("OSError: [Errno 28] No space left on device: '/data/x'").where == "/data/x"
    assert classify("preempted by the cloud").where is None  # a signature that names no place


def test_a_full_disk_keeps_the_last_300_characters_and_its_path() -> None:
    assert disk_full("e" * 10 + "f" * 300, "/scratch") == FailureClass(
        OPERATIONAL, "disk full", "f" * 300, where="/scratch"
    )
    assert disk_full("short", None).where is None


def test_the_summary_and_the_advice() -> None:
    node = FailureClass(OPERATIONAL, "node failure", "NODE_FAIL", where="n-2")
    assert node.summary() == f"operational failure, node failure at n-2: NODE_FAIL; next: {NEXT_STEPS['node failure']}"
    plain = FailureClass(DETERMINISTIC, "data-format error", "")
    assert plain.summary() == f"deterministic failure, data-format error: -; next: {ADVICE[DETERMINISTIC]}"
    assert plain.to_json() == {
        "kind": DETERMINISTIC, "cause": "data-format error", "evidence": "", "rule": None, "where": None,
        "advice": ADVICE[DETERMINISTIC],
    }  # fmt: skip


def test_a_recorded_class_reads_back_and_anything_else_is_none() -> None:
    node = FailureClass(OPERATIONAL, "node failure", "NODE_FAIL", "r1", "n-2")
    assert FailureClass.from_json(node.to_json()) == node
    assert FailureClass.from_json({"kind": UNCLASSIFIED}) == FailureClass(UNCLASSIFIED, "", "", None, None)
    assert FailureClass.from_json({"kind": OPERATIONAL, "cause": 3, "evidence": 4, "where": 5}) == FailureClass(
        OPERATIONAL, "3", "4", None, "5"
    )
    assert FailureClass.from_json({"kind": OPERATIONAL, "where": ""}).where is None  # type: ignore[union-attr]
    for damaged in (None, [], "operational", {"cause": "x"}, {"kind": "other"}):
        assert FailureClass.from_json(damaged) is None


def test_a_full_disk_is_where_the_first_write_that_named_its_file_did_not_fit() -> None:
    """What follows a full disk fails on it too (the gang's outcome, a manifest): the earliest named
    write is where it filled; a later line without a path, or of another cause, does not decide."""
    lines = [
        "OSError: [Errno 28] No space left on device",  # the trainer's: no file named
        "entrypoint exited 1: No space left on device (ENOSPC) writing /s/a/gang/outcome.json: free space",
        "No space left on device (ENOSPC) writing /s/a.json: free space",
        "OSError: [Errno 28] No space left on device",
    ]
    found = classify(None, lines)
    assert (found.cause, found.where) == ("disk full", "/s/a/gang/outcome.json")
    assert found.evidence == lines[1]
    assert classify(None, [lines[0], "NCCL error", lines[2]]).where == "/s/a.json"
    assert classify(None, [lines[2], "NCCL error"]).cause == "collective-communication failure"  # the last decides
    assert classify(None, [lines[0], lines[3]]).where is None


def test_a_full_disk_is_told_from_the_words_that_name_it_with_its_path() -> None:
    named = classify(None, ["rank 0: recorded: No space left on device (ENOSPC) writing /s/x: free space"])
    assert told(named) == "No space left on device (ENOSPC) writing /s/x: free space"
    bare = FailureClass(OPERATIONAL, "disk full", "OSError: [Errno 28] No space left on device", where="/s")
    assert told(bare) == "[Errno 28] No space left on device (at /s)"
    assert told(FailureClass(OPERATIONAL, "disk full", "EDQUOT")) == "EDQUOT"
