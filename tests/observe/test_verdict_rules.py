"""The rules behind the verdict and the reconciled state, on snapshots a real run rarely produces
(a foreign checkpoint digest, steps going backwards, a model from another attempt, tampered
weights), plus the bounded metrics reader. No launches: these are pure functions.
"""

from __future__ import annotations

import json

import pytest

from rlaunch.observe.collect import effective_state
from rlaunch.observe.run_files import read_metrics
from rlaunch.observe.run_jobs import JobView
from rlaunch.observe.run_status import (
    Cancellation,
    Checkpoints,
    Export,
    Joined,
    ModelLoad,
    RunStatus,
    Steps,
    Tasks,
    Terminal,
)
from rlaunch.observe.verdict import smoke_verdict

DIGEST = "d" * 64
STAGED = "/scratch/stage/run/a1b2c3/replica-0/models/model"


def passing() -> RunStatus:
    return RunStatus(
        reference="x/rl@2026.01.01",
        output_path="/p/x/rl/2026.01.01",
        attempt_id="a1b2c3",
        state="succeeded",
        record_state="succeeded",
        runtime_digest=DIGEST,
        tasks=Tasks(
            expected_replicas=1,
            replicas=[Joined(0, "h")],
            expected_trainer_processes=2,
            trainers=[Joined(0), Joined(1)],
        ),
        model=ModelLoad(
            configured="models/model",
            expected_identity="x/model@1:ff",
            recorded=True,
            configured_path=STAGED,
            loaded_path=STAGED,
            identity="x/model@1:ff",
            weights_sha256="ab",
            weight_files={"model.safetensors": "ab"},
            expected_weight_files={"model.safetensors": "ab"},
        ),  # fmt: skip
        steps=Steps(count=3, first_step=1, latest_step=3, latest_training_step=3, final_step=3),
        checkpoints=Checkpoints(root="/t/ckpt", steps=[3], latest_step=3, latest_meta={"runtime_digest": DIGEST}),
        export=Export(wanted=True, uri="/p/e", files=["config.json", "model.safetensors"]),
        terminal=Terminal(uri="/p/terminal.json", exists=True, state="succeeded", attempt_id="a1b2c3"),
    )


def failed(status: RunStatus) -> dict[str, str]:
    return {c.name: c.evidence for c in smoke_verdict(status).criteria if not c.ok}


def test_a_complete_snapshot_passes_with_weights_evidence() -> None:
    verdict = smoke_verdict(passing())
    assert verdict.ok and "match the model artifact record" in verdict.criteria[2].evidence


def test_a_missing_trainer_process_fails_the_join_criterion() -> None:
    s = passing()
    s.tasks.trainers = [Joined(0)]
    assert "1/2 trainer processes joined; never joined: trainer rank 1" in failed(s)["all expected tasks joined"]


def test_a_model_staged_for_another_attempt_is_not_the_configured_path() -> None:
    s = passing()
    s.model.configured_path = s.model.loaded_path = STAGED.replace("a1b2c3", "0ther0")
    assert "not attempt a1b2c3's staged copy" in failed(s)["configured model-loading path active"]


def test_weights_that_differ_from_the_model_record_fail() -> None:
    s = passing()
    s.model.weight_files = {"model.safetensors": "cd"}
    assert "differ from the sha256" in failed(s)["configured model-loading path active"]


def test_another_identity_fails() -> None:
    s = passing()
    s.model.identity = "x/model@2:ee"
    assert "names 'x/model@1:ff'" in failed(s)["configured model-loading path active"]


def test_an_identity_differing_only_in_its_last_character_fails() -> None:
    """Identities are compared in full, not by the prefix a status line prints."""
    s = passing()
    expected = s.model.expected_identity
    s.model.identity = expected[:-1] + ("0" if expected[-1] != "0" else "1")
    assert f"but the document names {expected!r}" in failed(s)["configured model-loading path active"]


def test_a_single_step_or_steps_going_backwards_do_not_advance() -> None:
    s = passing()
    s.steps = Steps(count=1, first_step=1, latest_step=1, latest_training_step=1, final_step=1)
    assert "only one optimizer step" in failed(s)["optimizer steps advance"]
    s.steps = Steps(count=3, first_step=1, latest_step=2, latest_training_step=2, final_step=2, increasing=False)
    assert "not strictly increasing" in failed(s)["optimizer steps advance"]


def test_a_checkpoint_from_another_runtime_or_before_the_last_step_is_not_terminal() -> None:
    s = passing()
    s.checkpoints.latest_meta = {"runtime_digest": "e" * 64}
    assert (
        "written by runtime digest eeeeeeeeeeee, not the run's dddddddddddd"
        in failed(s)["terminal checkpoint/export metadata exists"]
    )
    s = passing()
    s.checkpoints.latest_step = 2
    assert (
        "latest checkpoint is step 2 but training reached step 3"
        in failed(s)["terminal checkpoint/export metadata exists"]
    )
    s = passing()
    s.terminal.attempt_id = "older"
    assert "belongs to attempt older" in failed(s)["terminal checkpoint/export metadata exists"]
    s = passing()
    s.export.files = ["config.json"]
    assert "holds no HF model" in failed(s)["terminal checkpoint/export metadata exists"]


def test_a_terminal_manifest_naming_no_attempt_is_no_attempts() -> None:
    s = passing()
    s.terminal.attempt_id = None
    assert failed(s) == {
        "terminal checkpoint/export metadata exists": "the terminal manifest names no attempt, so it is not attempt a1b2c3's"
    }


@pytest.mark.parametrize("attempt_id", ["a", None], ids=["the-records-attempt", "an-attempt-without-id"])
def test_a_terminal_manifest_naming_no_attempt_never_makes_an_attempt_succeeded(attempt_id: str | None) -> None:
    unnamed = Terminal(exists=True, state="succeeded", attempt_id=None)
    state, reason = effective_state("running", job("coordinator", "failed"), None, unnamed, None, attempt_id)
    assert (state, reason) == (
        "failed",
        "jobs ended (coordinator failed) but the run record was never finalised (running)",
    )


def test_a_damaged_run_record_is_never_a_success() -> None:
    s = passing()
    s.damage = "/p/run_record.json is damaged (empty file); restore it"
    assert failed(s) == {
        "run succeeded": "the run record is damaged: /p/run_record.json is damaged (empty file); restore it"
    }


def test_running_is_never_a_success_even_with_everything_else_in_place() -> None:
    s = passing()
    s.state = "running"
    assert list(failed(s)) == ["run succeeded"]


def job(role: str, state: str) -> JobView:
    return JobView(role=role, job_id=f"{role}-1", state=state)


def test_the_state_is_reconciled_with_the_jobs() -> None:
    none = Terminal()
    assert (
        effective_state("running", job("coordinator", "running"), job("child", "running"), none, None, "a")[0]
        == "running"
    )
    assert effective_state("launching", job("coordinator", "running"), None, none, None, "a")[0] == "launching"
    state, reason = effective_state("running", job("coordinator", "failed"), job("child", "cancelled"), none, None, "a")
    assert state == "failed" and "never finalised" in reason
    assert (
        effective_state("running", job("coordinator", "cancelled"), job("child", "cancelled"), none, None, "a")[0]
        == "cancelled"
    )
    cancel = Cancellation(by="u@h", at="t")
    assert effective_state("failed", job("coordinator", "cancelled"), None, none, cancel, "a")[0] == "cancelled"
    assert effective_state("failed", job("coordinator", "failed"), None, none, None, "a")[0] == "failed"
    done = Terminal(exists=True, state="succeeded", attempt_id="a")
    assert effective_state("running", job("coordinator", "running"), None, done, None, "a")[0] == "succeeded"
    assert effective_state(None, None, None, none, None, None)[0] == "pending"


def test_a_long_metrics_log_is_read_as_head_and_tail(tmp_path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text(
        "".join(json.dumps({"step": i, "loss": 1.0 / i, "time": float(i)}) + "\n" for i in range(1, 20001))
        + '{"step": 20001, "lo'
    )
    log = read_metrics(str(path), limit=100_000)
    assert not log.complete and log.steps[0] == 1 and log.steps[-1] == 20000
    assert all(b > a for a, b in zip(log.steps, log.steps[1:])) and log.bad_lines == 1
    full = read_metrics(str(path), limit=None)
    assert full.complete and len(full.records) == 20000
    assert not read_metrics(str(tmp_path / "missing.jsonl")).exists


def test_a_damaged_run_records_criterion_is_false_not_unknown_in_json() -> None:
    s = passing()
    s.damage = "/p/run_record.json is damaged (empty file); restore it"
    data = smoke_verdict(s).to_json()
    assert data["ok"] is False
    assert [c["ok"] for c in data["criteria"] if c["name"] == "run succeeded"] == [False]
