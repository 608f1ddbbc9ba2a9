"""`rlaunch launch --config` applies the gates `--run` applies, to the document it is given: a
version is one runtime, a retry is authorised, a large launch declares a smoke or skips it with a
reason, a declared smoke passes verify-smoke and has parity. A hand-written document cannot go
around them (tests/judgement/test_one_judgement.py: the same words as `--run`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rlaunch.runs.run_record import update_attempt
from tests.support.host_launches import launch_edited

pytestmark = pytest.mark.usefixtures("signal_handlers")


def _earlier(prefix: str, doc: dict[str, Any], **fields: Any) -> None:
    update_attempt(doc["artifacts"]["output_path"], doc["run"]["id"], "earlier", fields)


def test_a_large_document_without_a_smoke_or_a_skip_is_refused(prefix: str) -> None:
    code, result, stderr = launch_edited(prefix, lambda d: d.pop("gates"))
    assert code == 2
    assert (
        "large launch (it allocates 8 nodes (more than the smoke gate's threshold of 1)) and it declares no smoke"
        in (result["failure"])
    )
    code, result, _ = launch_edited(prefix, lambda d: None)  # the same document with --skip-smoke-gate's authorisation
    assert code == 0 and result["state"] == "prepared", result


def test_a_declared_smoke_that_has_not_run_is_refused(prefix: str) -> None:
    def declare(doc: dict[str, Any]) -> None:
        doc["gates"] = {"smoke": {"identity": "smoke/rl@2026.11.30", "output_path": f"{prefix}/smoke/rl/2026.11.30"}}

    code, result, _ = launch_edited(prefix, declare)
    assert code == 2 and "the declared smoke smoke/rl@2026.11.30 has not run" in result["failure"]


def test_a_failed_version_needs_the_retry_authorisation_in_the_document(prefix: str) -> None:
    def failed_before(doc: dict[str, Any]) -> None:
        _earlier(prefix, doc, state="failed", runtime_digest=doc["runtime"]["source_digest"])

    code, result, _ = launch_edited(prefix, failed_before)
    assert code == 2 and "relaunching it is a retry" in result["failure"]

    def authorised(doc: dict[str, Any]) -> None:
        doc["gates"]["retry"] = {"reason": "preempted", "by": {"user": "op"}, "at": "2026-11-30T01:00:00"}

    code, result, _ = launch_edited(prefix, authorised)
    assert code == 0 and result["state"] == "prepared", result


def test_an_attempt_under_another_runtime_refuses_the_version(prefix: str) -> None:
    def other_runtime(doc: dict[str, Any]) -> None:
        _earlier(prefix, doc, state="succeeded", runtime_digest="f" * 64)

    code, result, _ = launch_edited(prefix, other_runtime)
    assert code == 2 and "a version is one runtime" in result["failure"] and "ffffffffffffffff" in result["failure"]

    def declared(doc: dict[str, Any]) -> None:
        doc["runtime"]["compatible_checkpoint_digests"] = ["f" * 64]

    code, result, _ = launch_edited(prefix, declared)
    assert code == 0 and result["state"] == "prepared", result


def test_large_is_more_nodes_or_gpus_than_the_thresholds_and_never_a_declared_smoke(prefix: str) -> None:
    def thresholds(nodes: int, gpus: int, **more: Any) -> Callable[[dict[str, Any]], None]:
        return lambda doc: doc.update(gates={"smoke_gate_nodes": nodes, "smoke_gate_gpus": gpus, **more})

    code, result, _ = launch_edited(prefix, thresholds(8, 63))  # 8 nodes x 8 GPUs: one GPU over
    assert code == 2 and "(it allocates 64 GPUs (more than the smoke gate's threshold of 63))" in result["failure"]
    code, result, _ = launch_edited(prefix, thresholds(7, 64))  # one node over
    assert code == 2 and "(it allocates 8 nodes (more than the smoke gate's threshold of 7))" in result["failure"]
    code, result, _ = launch_edited(prefix, thresholds(8, 64))  # at both thresholds: small, by a declaration
    assert code == 2 and result["failure"].startswith(
        "large: its execution raises the smoke gate's thresholds (smoke_gate_nodes=8, smoke_gate_gpus=64), yet it "
        "allocates 8 nodes (more than the default threshold of 1)"
    ), result
    waived = {"waivers": {"large": {"reason": "a throughput test of the whole pod"}}}
    code, result, _ = launch_edited(prefix, thresholds(8, 64, **waived))  # the declaration says why
    assert code == 0 and result["state"] == "prepared", result
    code, result, _ = launch_edited(prefix, thresholds(1, 8, is_smoke=True))  # a smoke rehearses; it is never large...
    assert code == 2 and result["failure"].startswith("large: it is declared a smoke (is_smoke=True), yet it allocates")
    code, result, _ = launch_edited(prefix, thresholds(1, 8, is_smoke=True, **waived))  # ...once it says why it is one
    assert code == 0 and result["state"] == "prepared", result


def test_a_wandb_document_without_its_key_is_refused_as_an_environment_problem(
    prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host applies the logger's credential like a declared one, and the class says where to look:
    the environment the launch came from, not the recipe."""

    def wandb(doc: dict[str, Any]) -> None:
        doc["skyrl"].setdefault("trainer", {}).update(logger="wandb", project_name="gsm8k-grpo")

    code, result, _ = launch_edited(prefix, wandb)
    assert code == 2 and result["failure"].startswith(
        "credentials: trainer.logger is 'wandb', which needs WANDB_API_KEY (not set) here."
    ), result
    assert result["failure_class"]["kind"] == "environment", result["failure_class"]
    assert result["failure_class"]["advice"].startswith("fix the environment the launch is submitted from")
    monkeypatch.setenv("WANDB_API_KEY", "set-here")  # the advice, followed
    code, result, _ = launch_edited(prefix, wandb)
    assert code == 0 and result["state"] == "prepared", result
