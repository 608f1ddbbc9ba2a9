"""`collect` reads each piece of a run's evidence from the file the run layout names, in process:
the reconciled state (a table over record, jobs, terminal manifest and cancellation), join markers,
the model-load record, metrics, checkpoints, the export and the terminal manifest, on a run laid
out by hand under a temporary prefix (no launch: tests/observe/test_run_states.py does real ones).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from rlaunch.launch_config import schema
from rlaunch.launch_config.failures import DETERMINISTIC, OPERATIONAL, UNCLASSIFIED, FailureClass
from rlaunch.observe.collect import collect, effective_state, iso_time, observed_failure_class, wandb_url
from rlaunch.observe.pace import WAITING, Pace
from rlaunch.observe.render import status_text
from rlaunch.observe.resolve import RunRef, at_path
from rlaunch.observe.run_jobs import JobView, ReplicaView
from rlaunch.observe.run_status import Authorised, Cancellation, RunStatus, Terminal

ATTEMPT = "a1b2c3d4e5f6"
OK = Terminal(exists=True, state="succeeded", attempt_id=ATTEMPT)


def job(role: str, state: str, error: str | None = None) -> JobView:
    return JobView(role=role, job_id=f"{role}-1", state=state, error=error)


C, K = "coordinator", "child"
CANCELLED = Cancellation(by="me@here", at="t")


@pytest.mark.parametrize(
    ("record", "coordinator", "child", "terminal", "cancelled", "expected"),
    [
        ("failed", None, None, OK, None, ("succeeded", None)),
        ("running", job(C, "running"), job(K, "running"), OK, None, ("succeeded", None)),
        ("failed", None, None, Terminal(exists=True, state="succeeded", attempt_id="older"), None, ("failed", None)),
        ("failed", None, None, Terminal(exists=True, state="failed", attempt_id=ATTEMPT), None, ("failed", None)),
        ("failed", None, None, Terminal(exists=False, state="succeeded", attempt_id=ATTEMPT), None, ("failed", None)),
        ("failed", None, None, Terminal(), CANCELLED,
         ("cancelled", "cancelled while running; the run record says failed")),
        ("failed", job(C, "cancelled"), None, Terminal(), None,
         ("cancelled", "cancelled while running; the run record says failed")),
        ("failed", job(C, "failed", error="unreachable"), job(K, "cancelled"), Terminal(), None,
         ("cancelled", "cancelled while running; the run record says failed")),
        ("failed", job(C, "failed"), job(K, "cancelled"), Terminal(), None, ("failed", None)),
        ("succeeded", job(C, "running"), None, Terminal(), None, ("succeeded", None)),
        ("prepared", None, None, Terminal(), None, ("prepared", None)),
        ("cancelled", None, None, Terminal(), None, ("cancelled", None)),
        (None, job(C, "running"), None, Terminal(), None,
         ("pending", "no attempt recorded yet: the coordinator has not reached the RL step")),
        ("running", None, None, Terminal(), None, ("running", None)),
        ("launching", None, None, Terminal(), None, ("launching", "waiting for the launch host")),
        ("launching", job(C, "running", error="gone"), None, Terminal(), None,
         ("launching", "waiting for the launch host")),
        ("launching", job(C, "running"), None, Terminal(), None, ("launching", None)),
        ("launching", job(C, "running"), job(K, "pending"), Terminal(), None, ("running", None)),
        ("running", job(C, "succeeded"), job(K, "running"), Terminal(), None, ("running", None)),
        ("running", job(C, "failed"), job(K, "failed"), Terminal(), None,
         ("failed", "jobs ended (coordinator failed, child failed) but the run record was never finalised (running)")),
        ("running", job(C, "failed", error="x"), job(K, "succeeded"), Terminal(), None,
         ("failed", "jobs ended (child succeeded) but the run record was never finalised (running)")),
        ("running", job(C, "failed"), job(K, "failed"), Terminal(), CANCELLED,
         ("cancelled", "jobs ended (coordinator failed, child failed); the run was cancelled")),
        ("launching", job(C, "cancelled"), job(K, "failed"), Terminal(), None,
         ("cancelled", "jobs ended (coordinator cancelled, child failed); the run was cancelled")),
        ("running", job(C, "failed"), job(K, "cancelled"), Terminal(), None,
         ("failed", "jobs ended (coordinator failed, child cancelled) but the run record was never finalised (running)")),
    ],
)  # fmt: skip
def test_the_effective_state(record, coordinator, child, terminal, cancelled, expected) -> None:  # noqa: ANN001
    assert effective_state(record, coordinator, child, terminal, cancelled, ATTEMPT) == expected


def test_marker_times_are_iso_whatever_form_they_took() -> None:
    assert iso_time(None) is None
    assert iso_time(0) == "1970-01-01T00:00:00.000+00:00"
    assert iso_time(1.5) == "1970-01-01T00:00:01.500+00:00"
    assert iso_time("2026-12-01T00:00:00Z") == "2026-12-01T00:00:00Z"


# -- a run laid out by hand ------------------------------------------------------------------------


def write(path: Path, content: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, (dict, list)):
        content = json.dumps(content)
    path.write_text(content) if isinstance(content, str) else path.write_bytes(content)


@pytest.fixture
def run(prefix: str, document: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The files a finished run leaves: 8 replicas, one ray-driver trainer, 3 steps, 2 checkpoints."""
    monkeypatch.delenv("RLAUNCH_LOCAL_ROOT", raising=False)
    document["run"].update(attempt_id=ATTEMPT, export_hf=True)
    document["skyrl"]["trainer"]["max_training_steps"] = 3
    doc = schema.from_dict(document)
    art = doc.artifacts
    attempt = Path(art.attempts_root) / ATTEMPT
    write(attempt / "resolved-launch.yaml", schema.dumps(doc))
    out, ckpt, export = Path(art.output_path), Path(art.checkpoint_root), Path(art.export_root)
    entry = {
        "attempt_id": ATTEMPT, "state": "succeeded", "artifact": document["run"]["artifact"], "backend": "local",
        "placement": {"root": str(tmp_path / "no-jobs")}, "resolved_config_uri": str(attempt / "resolved-launch.yaml"),
        "runtime_profile": "fsdp", "runtime_digest": doc.runtime.source_digest, "submitted_at": "t0",
        "finished_at": "t9", "fingerprint": "f" * 64, "topology": {"num_nodes": 8, "note": "as recorded"},
        "argv": ["--version", "v"], "phases": {"submitted": "t0"}, "failure": "an earlier hiccup",
    }  # fmt: skip
    write(
        out / "run_record.json", {"run_id": doc.run.id, "attempts": [{"attempt_id": "older", "state": "failed"}, entry]}
    )
    for rank in range(8):
        write(attempt / "joined" / f"replica-{rank}.json", {"host": f"n{rank}", "time": 60.0 * rank, "pid": 100 + rank})
    write(attempt / "joined" / "trainer-rank-0.json", {"host": "n0", "time": "2026-12-01T00:00:00Z", "world_size": 1})
    write(attempt / "joined" / "notes.json", {"host": "x"})
    write(attempt / "model_load.json", {
        "configured_path": "/stage/m", "loaded_path": "/stage/m", "identity": doc.inputs.model.identity,
        "weights_sha256": "ab", "resumed_from_step": 1, "architecture": "Qwen3ForCausalLM", "num_parameters": 8,
        "weight_files": {"model.safetensors": "ab"},
    })  # fmt: skip
    model_record = {"result": {"files": {"model.safetensors": "ab", "config.json": "cc", "x.bin": "dd"}}}
    write(Path(doc.inputs.model.uri) / ".artifact.json", model_record)
    steps = [{"step": s, "time": 100.0 + 30 * s, "loss": 0.1 * s, "training_step": (s + 1) // 2} for s in (1, 2, 3)]
    write(attempt / "metrics.jsonl", "".join(json.dumps(s) + "\n" for s in steps))
    for step in (1, 3):
        write(ckpt / f"global_step_{step}" / "rlaunch_checkpoint.json", {"runtime_digest": doc.runtime.source_digest})
    write(ckpt / "latest", "3\n")
    policy = export / "global_step_3" / "policy"
    for name in ("config.json", "model.safetensors"):
        write(policy / name, "{}")
    result = {
        "state": "succeeded",
        "attempt_id": ATTEMPT,
        "model": {"global_step": 3, "policy_export_uri": str(policy)},
    }
    write(out / "terminal.json", {"config": {}, "result": result})
    return {"prefix": prefix, "doc": doc, "attempt": attempt, "out": out, "ckpt": ckpt, "policy": policy}


def snapshot(run: dict[str, Any], attempt_id: str | None = None) -> RunStatus:
    return collect(at_path(str(run["out"]), prefix=run["prefix"], attempt_id=attempt_id), "ref")


def test_every_piece_is_read_from_its_file(run: dict[str, Any]) -> None:
    doc, s = run["doc"], snapshot(run)
    assert (s.reference, s.attempt_id, s.attempt_number, s.attempts_total) == ("ref", ATTEMPT, 2, 2)
    assert (s.output_path, s.artifact, s.fingerprint, s.backend) == (
        str(run["out"]),
        doc.run.artifact,
        "f" * 64,
        "local",
    )
    assert (s.runtime_profile, s.runtime_digest) == ("fsdp", doc.runtime.source_digest)
    assert (s.submitted_at, s.finished_at, s.failure) == ("t0", "t9", "an earlier hiccup")
    assert (s.argv, s.topology) == (["--version", "v"], {"num_nodes": 8, "note": "as recorded"})
    assert s.phases == {  # the recorded phase, and those the join markers and the metrics tell
        "submitted": "t0",
        "inputs_staged": "1970-01-01T00:07:00.000+00:00",
        "first_optimizer_step": "1970-01-01T00:02:10.000+00:00",
    }
    assert s.damage is None
    assert s.state == "succeeded" and s.record_state == "succeeded" and s.run_id == doc.run.id
    assert s.document_uri == str(run["attempt"] / "resolved-launch.yaml")
    assert s.attempt_dir == str(run["attempt"])
    t = s.tasks
    assert (t.expected_replicas, t.expected_trainer_processes, t.trainer_launcher) == (8, 1, "ray-driver")
    assert [j.rank for j in t.replicas] == list(range(8)) and t.missing_replicas == [] and t.missing_trainers == []
    assert (t.replicas[1].host, t.replicas[1].pid, t.replicas[1].time) == ("n1", 101, "1970-01-01T00:01:00.000+00:00")
    assert (t.trainers[0].rank, t.trainers[0].world_size, t.trainers[0].time) == (0, 1, "2026-12-01T00:00:00Z")
    m = s.model
    assert m.recorded and m.configured_path == m.loaded_path == "/stage/m"
    assert m.identity == m.expected_identity == doc.inputs.model.identity and m.input_uri == doc.inputs.model.uri
    assert m.configured == doc.inputs.model.local_path  # the recipe names no trainer.policy.model.path
    assert (m.weights_sha256, m.resumed_from_step, m.architecture, m.num_parameters) == ("ab", 1, "Qwen3ForCausalLM", 8)
    assert m.weight_files == {"model.safetensors": "ab"}
    assert m.expected_weight_files == {
        "model.safetensors": "ab",
        "x.bin": "dd",
    }  # weights only, from the model's record
    st = s.steps
    assert (st.count, st.first_step, st.latest_step, st.latest_training_step) == (3, 1, 3, 2)
    assert st.increasing and st.complete and st.last["loss"] == pytest.approx(0.3) and st.last["training_step"] == 2
    assert st.steps_per_minute == pytest.approx(2.0) and st.url == str(run["attempt"] / "metrics.jsonl")
    assert st.final_step == 3
    c = s.checkpoints
    assert (c.root, c.steps, c.latest_step) == (str(run["ckpt"]), [1, 3], 3)
    assert c.latest_path == str(run["ckpt"] / "global_step_3") and c.latest_meta == {
        "runtime_digest": doc.runtime.source_digest
    }
    assert s.terminal == Terminal(str(run["out"] / "terminal.json"), True, "succeeded", ATTEMPT, 3, None)
    assert s.export.wanted and s.export.uri == str(run["policy"]) and s.export.present
    assert s.export.files == ["config.json", "model.safetensors"]
    assert s.cancelled is None


def test_an_earlier_attempt_is_shown_with_what_it_left(run: dict[str, Any]) -> None:
    s = snapshot(run, "older")
    assert (s.attempt_id, s.attempt_number, s.record_state, s.state) == ("older", 1, "failed", "failed")
    assert s.document_uri is None and s.tasks.replicas == []


def test_before_the_host_finished_the_export_is_the_trainers_and_a_cancel_is_named(run: dict[str, Any]) -> None:
    (run["out"] / "terminal.json").unlink()
    write(
        run["out"] / "cancellations" / f"{ATTEMPT}.json",
        {"by": {"user": "ann"}, "at": "t1", "reason": "oops"},
    )
    s = snapshot(run)
    assert not s.terminal.exists and s.export.uri == str(run["policy"]) and s.export.present
    assert s.cancelled == Cancellation(by="ann@?", at="t1", reason="oops")
    assert s.terminal == Terminal(uri=str(run["out"] / "terminal.json"))
    (run["policy"] / "config.json").unlink()
    (run["policy"] / "model.safetensors").unlink()
    assert snapshot(run).export.uri is None


def test_a_checkpoint_without_its_manifest_is_incomplete_not_kept(run: dict[str, Any]) -> None:
    """A save cut short (a full disk mid-write) leaves weights and no manifest: not a kept checkpoint."""
    write(run["ckpt"] / "global_step_2" / "model.safetensors", b"\0" * 64)
    write(run["ckpt"] / "global_step_4" / "rlaunch_checkpoint.jsonx", "{}")  # the manifest's name, exactly
    s = dataclasses.replace(snapshot(run), phases={})  # the fixture's phases are not times
    assert (s.checkpoints.steps, s.checkpoints.incomplete) == ([1, 3], [2, 4])
    assert "checkpoints  kept [1, 3], incomplete [2, 4] (no rlaunch_checkpoint.json), latest 3" in status_text(s)
    (run["ckpt"] / "latest").unlink()
    for step in (1, 3):
        (run["ckpt"] / f"global_step_{step}" / "rlaunch_checkpoint.json").unlink()
    text = status_text(dataclasses.replace(snapshot(run), phases={}))
    assert "checkpoints  kept [none], incomplete [1, 2, 3, 4] (no rlaunch_checkpoint.json), no latest marker" in text


def test_damaged_or_missing_evidence_is_named_not_guessed(run: dict[str, Any]) -> None:
    write(run["ckpt"] / "latest", "three\n")
    (run["attempt"] / "model_load.json").unlink()
    write(run["attempt"] / "metrics.jsonl", "".join(json.dumps({"step": s, "time": 5.0}) + "\n" for s in (2, 1)))
    s = snapshot(run)
    assert s.checkpoints.marker_error == f"{run['ckpt'] / 'latest'} holds 'three', not a step number"
    assert s.checkpoints.latest_step is None and s.checkpoints.steps == [1, 3]
    assert not s.model.recorded and s.model.expected_identity == run["doc"].inputs.model.identity
    assert not s.steps.increasing and s.steps.steps_per_minute is None and s.steps.latest_step == 1
    (run["ckpt"] / "global_step_3" / "rlaunch_checkpoint.json").write_text("[]")
    write(run["ckpt"] / "latest", "3")
    assert snapshot(run).checkpoints.latest_meta is None


def test_a_cancel_the_record_carries_and_one_by_name_only(run: dict[str, Any]) -> None:
    record = json.loads((run["out"] / "run_record.json").read_text())
    record["attempts"][-1]["cancelled"] = {"by": "ci-bot", "at": "t2"}
    write(run["out"] / "run_record.json", record)
    assert snapshot(run).cancelled == Cancellation(by="ci-bot", at="t2", reason=None)
    write(run["out"] / "cancellations" / f"{ATTEMPT}.json", {"by": {"host": "h"}, "at": "t3"})
    assert snapshot(run).cancelled == Cancellation(by="?@h", at="t3", reason=None)


def test_without_a_resolved_document_the_handed_over_one_or_the_artifact_records_is_read(run: dict[str, Any]) -> None:
    record = json.loads((run["out"] / "run_record.json").read_text())
    entry = record["attempts"][-1]
    entry.pop("resolved_config_uri")
    handed = run["attempt"] / "launch.yaml"
    handed.write_text((run["attempt"] / "resolved-launch.yaml").read_text())
    entry["launch_document_uri"] = str(handed)
    write(run["out"] / "run_record.json", record)
    assert snapshot(run).document_uri == str(handed)
    entry.pop("launch_document_uri")
    write(run["out"] / "run_record.json", record)
    assert snapshot(run).document_uri is None and snapshot(run).tasks.expected_replicas is None
    data = schema.loads((run["attempt"] / "resolved-launch.yaml").read_text()).to_dict()
    write(run["out"] / ".artifact.json", {"config": {"launch_document": data}})
    s = snapshot(run)
    assert s.document_uri is None and s.tasks.expected_replicas == 8 and s.checkpoints.latest_step == 3


def test_markers_sort_by_rank_and_an_unknown_profile_trusts_their_world_size(run: dict[str, Any]) -> None:
    joined = run["attempt"] / "joined"
    for rank in (2, 1):
        write(joined / f"trainer-rank-{rank}.json", {"world_size": 4})
    record = json.loads((run["out"] / "run_record.json").read_text())
    record["attempts"][-1]["runtime_profile"] = "no-such-profile"
    write(run["out"] / "run_record.json", record)
    t = snapshot(run).tasks
    assert [j.rank for j in t.trainers] == [0, 1, 2] and t.expected_trainer_processes == 4
    assert (t.trainer_launcher, t.missing_trainers) == (None, [3])


def test_an_unknown_profiles_markers_without_a_world_size_count_one_process(run: dict[str, Any]) -> None:
    write(run["attempt"] / "joined" / "trainer-rank-0.json", {"host": "n0"})
    record = json.loads((run["out"] / "run_record.json").read_text())
    record["attempts"][-1]["runtime_profile"] = "no-such-profile"
    write(run["out"] / "run_record.json", record)
    t = snapshot(run).tasks
    assert (t.expected_trainer_processes, t.missing_trainers) == (1, [])


def test_a_damaged_record_is_carried_into_the_snapshot(run: dict[str, Any]) -> None:
    (run["out"] / "run_record.json").write_text("{")
    s = snapshot(run)
    assert s.damage and "run_record.json is damaged" in s.damage
    assert s.attempt_id == ATTEMPT and s.terminal.exists  # rebuilt from the terminal manifest


def test_what_the_record_leaves_out_comes_from_the_document_and_the_attempt_manifest(run: dict[str, Any]) -> None:
    record = json.loads((run["out"] / "run_record.json").read_text())
    entry = record["attempts"][-1]
    for key in ("artifact", "topology", "failure"):
        entry.pop(key)
    write(run["out"] / "run_record.json", record)
    write(Path(run["doc"].artifacts.attempts_root) / f"{ATTEMPT}.json", {"result": {"failure": "the host said why"}})
    ref = at_path(str(run["out"]), prefix=run["prefix"])
    s = collect(ref)
    assert ref.artifact is None and s.reference == str(run["out"]) and s.artifact is None
    assert s.topology == dataclasses.asdict(run["doc"].cluster.allocation)
    assert s.failure == "the host said why"
    data = s.to_json()
    assert data["tasks"]["missing_replicas"] == [] and data["tasks"]["missing_trainer_processes"] == []
    assert data["export"]["present"] is True and data["is_terminal"] is True and data["state"] == "succeeded"
    json.dumps(data)


def test_without_any_document_the_attempt_directory_is_where_the_handed_over_one_was(run: dict[str, Any]) -> None:
    record = json.loads((run["out"] / "run_record.json").read_text())
    entry = record["attempts"][-1]
    entry.pop("resolved_config_uri")
    entry["launch_document_uri"] = str(run["attempt"] / "missing.yaml")
    write(run["out"] / "run_record.json", record)
    s = snapshot(run)
    assert s.document_uri is None and s.attempt_dir == str(run["attempt"])
    assert s.tasks.expected_replicas is None and [j.rank for j in s.tasks.replicas] == list(range(8))


def test_a_damaged_record_with_nothing_else_is_damaged(tmp_path: Path) -> None:
    ref = RunRef(output_path=str(tmp_path / "x"), prefix=None, artifact=None, record=None, damage="it is damaged")
    s = collect(ref, "x@1")
    assert (s.state, s.state_reason, s.damage) == (
        "damaged",
        "no other state of the run names an attempt",
        "it is damaged",
    )
    assert collect(RunRef(output_path=str(tmp_path / "x"), prefix=None, artifact=None, record=None)).state == "pending"


REFUSAL = {
    "at": "2026-12-07T10:00:00.000+00:00",
    "coordinator_job_id": "c9",
    "steps": [{"identity": "x@1", "judged": "a" * 64, "replayed": "b" * 64, "field": "config.steps"}],
    "environment": {"STEPS": "unset in the coordinator"},
}


def test_a_run_whose_coordinator_refused_its_replay_is_refused_not_pending(tmp_path: Path) -> None:
    record = {"run_id": "r", "attempts": [], "replay_refusals": [{**REFUSAL, "coordinator_job_id": "c1"}, REFUSAL]}
    s = collect(RunRef(output_path=str(tmp_path / "x"), prefix=None, artifact=None, record=record), "x@1")
    assert (s.state, s.state_reason) == (
        "refused",
        f"coordinator c9 refused at 2026-12-07T10:00:00.000+00:00: its replay of the main is not the graph that was "
        f"judged: x@1 judged {'a' * 64}, replayed {'b' * 64} (first differs at config.steps); the graph read $STEPS "
        "(unset in the coordinator)",
    )
    attempted = {**record, "attempts": [{"attempt_id": ATTEMPT, "state": "failed"}]}
    s = collect(RunRef(output_path=str(tmp_path / "x"), prefix=None, artifact=None, record=attempted), "x@1")
    assert s.state == "failed"  # an attempt's own state is what status shows of it


def rewrite_attempt(run: dict[str, Any], **changes: Any) -> None:
    """Change the shown attempt's entry in the run record (a key set to None is removed)."""
    record = json.loads((run["out"] / "run_record.json").read_text())
    entry = record["attempts"][-1]
    for key, value in changes.items():
        entry.pop(key, None) if value is None else entry.update({key: value})
    write(run["out"] / "run_record.json", record)


def test_the_retry_authorisation_names_who_when_and_why(run: dict[str, Any]) -> None:
    assert snapshot(run).retry is None
    rewrite_attempt(run, retry={"by": {"user": "ann", "host": "h1"}, "at": "t5", "reason": "node lost"})
    s = snapshot(run)
    assert s.retry == Authorised(by="ann@h1", at="t5", reason="node lost")
    assert s.to_json()["retry"] == {"by": "ann@h1", "at": "t5", "reason": "node lost"}
    rewrite_attempt(run, retry={"by": "ci-bot"})
    assert snapshot(run).retry == Authorised(by="ci-bot", at=None, reason=None)
    rewrite_attempt(run, retry=True)  # not an authorisation record: nothing is shown as authorised
    assert snapshot(run).retry is None


def test_a_failed_attempt_is_classified_as_recorded_else_from_its_failure(run: dict[str, Any]) -> None:
    (run["out"] / "terminal.json").unlink()
    recorded = {"kind": DETERMINISTIC, "cause": "data-format error", "evidence": "KeyError: 'prompt'", "rule": "r1"}
    rewrite_attempt(run, failure_class=recorded)
    assert snapshot(run).failure_class is None  # a succeeded attempt has no failure class
    rewrite_attempt(run, state="failed")
    s = snapshot(run)
    assert s.failure_class == FailureClass(DETERMINISTIC, "data-format error", "KeyError: 'prompt'", "r1")
    assert s.to_json()["failure_class"]["kind"] == DETERMINISTIC
    rewrite_attempt(run, failure_class=None, failure="step 2\ntorch.OutOfMemoryError: CUDA out of memory")
    assert snapshot(run).failure_class == FailureClass(
        OPERATIONAL, "killed for memory", "torch.OutOfMemoryError: CUDA out of memory"
    )
    rewrite_attempt(run, failure=None)
    assert snapshot(run).failure_class == FailureClass(UNCLASSIFIED, "no known signature", "")


def test_the_wandb_run_is_the_recorded_one_else_the_trainers(run: dict[str, Any]) -> None:
    assert snapshot(run).wandb is None
    trainers = {"project": "p", "id": "run-1", "url": "https://wandb.example/p/run-1"}
    write(run["attempt"] / "wandb.json", trainers)
    assert snapshot(run).wandb == trainers
    rewrite_attempt(run, wandb={"project": "p", "id": "run-2"})
    s = snapshot(run)
    assert s.wandb == {"project": "p", "id": "run-2"} and s.to_json()["wandb"] == {"project": "p", "id": "run-2"}
    rewrite_attempt(run, wandb="run-2")  # not a run record: the trainer's is shown
    assert snapshot(run).wandb == trainers
    write(run["attempt"] / "wandb.json", ["run-1"])
    assert snapshot(run).wandb is None


def test_the_terminal_manifests_failure_is_read_and_a_missing_global_step_is_none(run: dict[str, Any]) -> None:
    result = {"state": "failed", "attempt_id": ATTEMPT, "failure": "the host said: boom", "model": {}}
    write(run["out"] / "terminal.json", {"config": {}, "result": result})
    uri = str(run["out"] / "terminal.json")
    assert snapshot(run).terminal == Terminal(uri, True, "failed", ATTEMPT, None, "the host said: boom")


def test_past_256_join_markers_only_their_names_are_read(run: dict[str, Any]) -> None:
    """257 replica markers and one trainer's: exactly 256 are read (host known), the rest counted by name."""
    for rank in range(8, 257):
        write(run["attempt"] / "joined" / f"replica-{rank}.json", {"host": f"n{rank}", "time": 1.0})
    t = snapshot(run).tasks
    joined = t.replicas + t.trainers
    assert len(t.replicas) == 257 and len(t.trainers) == 1
    assert sum(j.host is not None for j in joined) == 256
    assert [j.rank for j in t.replicas] == list(range(257))


def failed_jobs(child: tuple[str, int], coordinator: tuple[str, int]) -> dict[str, JobView]:
    def one(role: str, state: str, code: int) -> JobView:
        return JobView(role=role, job_id=f"{role}-1", state=state, replicas=[ReplicaView(0, state, exit_code=code)])

    return {"child": one(K, *child), "coordinator": one(C, *coordinator)}


def test_an_unclassified_failure_is_classed_by_the_childs_exit_code_then_the_coordinators() -> None:
    def observed(failure: str | None = None, reason: str | None = None, **jobs: JobView) -> FailureClass:
        return observed_failure_class(
            RunStatus("r", "/o", state="failed", failure=failure, state_reason=reason, **jobs)
        )

    memory = FailureClass(OPERATIONAL, "killed for memory", "exit code 137: node lost or killed for memory (SIGKILL)")
    preempted = FailureClass(OPERATIONAL, "preempted", "exit code 143: terminated (SIGTERM)")
    assert observed(**failed_jobs(("failed", 137), ("failed", 143))) == memory  # the child's first
    assert observed(**failed_jobs(("cancelled", 137), ("failed", 143))) == preempted  # rlaunch stopped the child
    assert observed(**failed_jobs(("failed", 143), ("cancelled", 137))) == preempted
    oom = "torch.OutOfMemoryError: CUDA out of memory"
    assert observed(reason=f"step 2\n{oom}").cause == "killed for memory"  # no failure: the state's reason
    assert observed("a plain error", f"step 2\n{oom}") == FailureClass(
        UNCLASSIFIED, "no known signature", "a plain error"
    )


def test_a_torchrun_profile_expects_one_trainer_per_device_slot_and_one_without_a_document(run: dict[str, Any]) -> None:
    rewrite_attempt(run, runtime_profile="trl-cpu")
    t = snapshot(run).tasks
    assert (t.expected_trainer_processes, t.trainer_launcher) == (8, "torchrun")  # 8 GPUs per node
    rewrite_attempt(run, resolved_config_uri=None)  # no document: the node's slots are unknown, so one
    t = snapshot(run).tasks
    assert (t.expected_trainer_processes, t.trainer_launcher) == (1, "torchrun")


def test_the_configured_model_is_the_recipes_policy_path_when_it_names_one(run: dict[str, Any]) -> None:
    resolved = run["attempt"] / "resolved-launch.yaml"
    data = schema.loads(resolved.read_text()).to_dict()
    data["skyrl"]["trainer"].setdefault("policy", {}).setdefault("model", {})["path"] = "/recipe/model"
    resolved.write_text(schema.dumps(schema.from_dict(data)))
    assert snapshot(run).model.configured == "/recipe/model"


def test_the_failure_class_in_json_carries_its_advice(run: dict[str, Any]) -> None:
    (run["out"] / "terminal.json").unlink()
    rewrite_attempt(run, state="failed", failure="torch.OutOfMemoryError: CUDA out of memory")
    s = snapshot(run)
    assert s.to_json()["failure_class"] == s.failure_class.to_json() and s.failure_class.advice


def metrics(run: dict[str, Any], *records: dict[str, Any]) -> None:
    write(run["attempt"] / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in records))


def test_steps_at_their_edges(run: dict[str, Any]) -> None:
    metrics(run, {"step": 1, "time": 100.0}, {"step": 3, "time": 160.0})  # two records: a rate already
    st = snapshot(run).steps
    assert st.steps_per_minute == pytest.approx(2.0) and st.latest_training_step == 3
    metrics(run, {"step": 1, "time": 1.0}, {"step": 2, "time": 2.0}, {"step": 3, "time": 3.0})
    assert snapshot(run).steps.latest_training_step == 3  # no training_step: the latest step, not another
    metrics(run, {"step": 1, "time": 1.0}, {"step": 2, "time": 2.0}, {"step": 2, "time": 3.0})
    assert not snapshot(run).steps.increasing  # a repeated step is not an increase


def test_a_recipe_without_a_step_budget_has_no_final_step(run: dict[str, Any]) -> None:
    resolved = run["attempt"] / "resolved-launch.yaml"
    data = schema.loads(resolved.read_text()).to_dict()
    data["skyrl"]["trainer"].pop("max_training_steps")
    resolved.write_text(schema.dumps(schema.from_dict(data)))
    assert snapshot(run).steps.final_step is None


def test_expected_weight_files_need_either_recorded_weights_and_a_model_record_with_files(run: dict[str, Any]) -> None:
    load = json.loads((run["attempt"] / "model_load.json").read_text())
    load.pop("weights_sha256")
    write(run["attempt"] / "model_load.json", load)  # the file list only
    assert snapshot(run).model.expected_weight_files == {"model.safetensors": "ab", "x.bin": "dd"}
    write(Path(run["doc"].inputs.model.uri) / ".artifact.json", {"result": {}})  # a record that lists no files
    assert snapshot(run).model.expected_weight_files == {}


def test_an_unreadable_checkpoint_root_lists_no_checkpoints(
    run: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlaunch import storage

    listed = storage.list_names

    def list_names(url: str) -> list[str]:
        if str(url).rstrip("/") == str(run["ckpt"]):
            raise PermissionError(13, "Permission denied", str(url))
        return listed(url)

    monkeypatch.setattr(storage, "list_names", list_names)
    c = snapshot(run).checkpoints
    assert (c.steps, c.incomplete, c.latest_step) == ([], [], 3)  # the marker is still read


def test_a_long_unreadable_latest_marker_is_quoted_to_its_first_40_characters(run: dict[str, Any]) -> None:
    write(run["ckpt"] / "latest", "x" * 39 + "yz")
    error = snapshot(run).checkpoints.marker_error
    assert error == f"{run['ckpt'] / 'latest'} holds {'x' * 39 + 'y'!r}, not a step number"


def test_the_export_is_the_one_the_terminal_manifest_names_not_the_guess(run: dict[str, Any]) -> None:
    elsewhere = run["out"].parent / "published" / "policy"
    write(elsewhere / "model.safetensors", "{}")
    result = {"state": "succeeded", "attempt_id": ATTEMPT, "model": {"policy_export_uri": str(elsewhere)}}
    write(run["out"] / "terminal.json", {"config": {}, "result": result})
    export = snapshot(run).export
    assert (export.uri, export.files) == (str(elsewhere), ["model.safetensors"])


def test_a_copied_runs_terminal_manifest_and_export_are_read_where_its_document_put_them(run: dict[str, Any]) -> None:
    import shutil

    moved = run["out"].parent / "moved"
    shutil.copytree(run["out"], moved)
    (run["out"] / "terminal.json").unlink()
    shutil.rmtree(run["policy"])
    s = collect(at_path(str(moved), prefix=run["prefix"]), "ref")
    assert s.terminal == Terminal(uri=str(run["out"] / "terminal.json"))
    assert s.export.uri is None and s.export.files == []


def test_an_attempt_recorded_without_an_id_takes_no_cancellation_file(run: dict[str, Any]) -> None:
    rewrite_attempt(run, attempt_id="")
    write(run["out"] / "cancellations" / ".json", {"by": "someone", "at": "t1"})  # a file named by no id
    assert snapshot(run).cancelled is None


def test_the_attempts_kind_resources_and_artifact_are_its_own(run: dict[str, Any]) -> None:
    s = snapshot(run)
    assert (s.kind, s.resources) == ("rl", {})  # an RL attempt records neither
    rewrite_attempt(run, kind="step", resources={"cpus": 4}, artifact="team/other@2")
    s = snapshot(run)
    assert (s.kind, s.resources, s.artifact) == ("step", {"cpus": 4}, "team/other@2")


def test_a_step_jobs_attempt_directory_is_the_one_it_recorded(run: dict[str, Any]) -> None:
    step_dir = run["out"].parent / "step-attempt"
    rewrite_attempt(run, resolved_config_uri=None, attempt_dir=str(step_dir))
    assert snapshot(run).attempt_dir == str(step_dir)


def test_before_any_attempt_no_document_is_read_and_no_attempt_is_numbered(run: dict[str, Any]) -> None:
    data = schema.loads((run["attempt"] / "resolved-launch.yaml").read_text()).to_dict()
    write(run["out"] / ".artifact.json", {"config": {"launch_document": data}})
    record = json.loads((run["out"] / "run_record.json").read_text())
    write(run["out"] / "run_record.json", {**record, "attempts": []})
    s = snapshot(run)
    assert (s.attempt_number, s.attempts_total, s.document_uri, s.attempt_dir) == (0, 0, None, None)
    assert s.tasks.expected_replicas is None and s.checkpoints.root is None


def test_without_a_recorded_profile_the_documents_names_the_trainer_launcher(run: dict[str, Any]) -> None:
    rewrite_attempt(run, runtime_profile=None)
    t = snapshot(run).tasks
    assert (t.expected_trainer_processes, t.trainer_launcher) == (1, "ray-driver")  # the document's fsdp


def test_a_failed_attempt_with_a_cancellation_on_file_is_cancelled(run: dict[str, Any]) -> None:
    (run["out"] / "terminal.json").unlink()
    rewrite_attempt(run, state="failed")
    write(run["out"] / "cancellations" / f"{ATTEMPT}.json", {"by": "ann", "at": "t1"})
    s = snapshot(run)
    assert (s.state, s.state_reason) == ("cancelled", "cancelled while running; the run record says failed")


def test_a_terminal_manifest_of_this_attempt_settles_a_record_still_running(run: dict[str, Any]) -> None:
    rewrite_attempt(run, state="running")
    assert (snapshot(run).state, snapshot(run).state_reason) == ("succeeded", None)


def test_the_attempts_jobs_are_looked_up_under_its_prefix_and_settle_an_unfinished_record(
    run: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlaunch.observe import run_jobs

    asked: list[str | None] = []

    def jobs(attempt: dict[str, Any], prefix: str | None) -> tuple[list[Any], JobView, JobView]:
        asked.append(prefix)
        return [], job(C, "failed"), job(K, "cancelled")

    monkeypatch.setattr(run_jobs, "run_jobs", jobs)
    (run["out"] / "terminal.json").unlink()
    rewrite_attempt(run, state="running")
    s = snapshot(run)
    assert asked == [run["prefix"]] and (s.coordinator, s.child) == (job(C, "failed"), job(K, "cancelled"))
    assert (s.state, s.state_reason) == (
        "failed",
        "jobs ended (coordinator failed, child cancelled) but the run record was never finalised (running)",
    )


def test_a_job_named_before_any_attempt_is_looked_up_as_the_coordinator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlaunch.cluster.protocol import JobState, JobStatus
    from rlaunch.observe import run_jobs

    asked: list[tuple[str, str | None]] = []
    found = {"c9": (None, JobStatus("c9", "coordinator", "local", JobState.RUNNING))}
    monkeypatch.setattr(
        run_jobs, "find_job", lambda job_id, prefix: asked.append((job_id, prefix)) or found.get(job_id)
    )
    ref = RunRef(output_path=str(tmp_path / "x"), prefix="/p", artifact=None, record=None, job_id="c9")
    s = collect(ref)
    assert asked == [("c9", "/p")] and s.coordinator == JobView("coordinator", "c9", state="running")
    s = collect(dataclasses.replace(ref, job_id="c8"))
    assert s.coordinator == JobView("coordinator", "c8", error="the backend has no record of this job")


@pytest.mark.parametrize(
    ("run", "url"),
    [
        (None, None),
        ({"url": "https://wandb.example/team/rl/runs/abc", "entity": "team", "project": "rl", "run_id": "abc"},
         "https://wandb.example/team/rl/runs/abc"),
        ({"url": None, "entity": "team", "project": "rl", "run_id": "abc", "mode": "online"},
         "https://wandb.ai/team/rl/runs/abc"),
        ({"entity": "team", "project": "rl", "id": "abc"}, "https://wandb.ai/team/rl/runs/abc"),
        ({"url": "wandb.ai/team", "entity": "team", "project": "rl", "id": "abc"}, "https://wandb.ai/team/rl/runs/abc"),
        ({"entity": None, "project": "rl", "run_id": "abc"}, None),
        ({"entity": "team", "project": "", "run_id": "abc"}, None),
        ({"entity": "team", "project": "rl"}, None),
        ({"url": None, "entity": "team", "project": "rl", "run_id": "abc", "mode": "offline"}, None),
        ({"entity": "team", "project": "rl", "run_id": "abc", "mode": "dryrun"}, None),
    ],
)  # fmt: skip
def test_the_wandb_runs_page_is_the_recorded_url_else_built_from_entity_project_and_id(
    run: dict[str, Any] | None, url: str | None
) -> None:
    assert wandb_url(run) == url


def test_status_shows_the_wandb_runs_page_and_a_wandb_logger_that_has_no_run_yet(run: dict[str, Any]) -> None:
    assert "W&B" not in status_text(snapshot(run))  # no logger named, no run recorded: nothing to say
    doc = run["doc"]
    skyrl = {**doc.skyrl, "trainer": {**doc.skyrl["trainer"], "logger": ["console", "wandb"]}}
    write(run["attempt"] / "resolved-launch.yaml", schema.dumps(doc.replace_skyrl(skyrl)))
    s = snapshot(run)
    assert s.wandb_logger and s.wandb_url is None
    assert "W&B          logger wandb: no run recorded yet" in status_text(s)
    write(run["attempt"] / "wandb.json", {"entity": "team", "project": "rl", "run_id": "abc", "mode": "online"})
    s = snapshot(run)
    assert s.to_json()["wandb_url"] == "https://wandb.ai/team/rl/runs/abc"
    lines = status_text(s).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("W&B"))
    assert lines[start : start + 2] == [
        "W&B          run abc  project rl  entity team",
        "             https://wandb.ai/team/rl/runs/abc",
    ]


def test_a_running_attempt_shows_its_pace_and_an_ended_one_none(run: dict[str, Any]) -> None:
    assert snapshot(run).steps.pace is None  # succeeded
    (run["out"] / "terminal.json").unlink()
    rewrite_attempt(run, state="running")
    s = snapshot(run)
    assert s.state == "running"
    # training steps 1, 1, 2 logged at 130, 160, 190 s: training step 2 began 60 s after 1; 1 of 3 to go
    assert s.steps.pace == Pace(
        over_steps=1, seconds_per_step=60.0, steps_per_hour=60.0, remaining_steps=1, eta_seconds=60.0,
        eta_at="1970-01-01T00:04:10.000+00:00",
    )  # fmt: skip
    assert s.to_json()["steps"]["pace"]["eta_at"] == "1970-01-01T00:04:10.000+00:00"
    assert "ETA        1m 00s, at 1970-01-01T00:04:10.000+00:00 (1 steps to go)" in status_text(s)
    (run["attempt"] / "metrics.jsonl").unlink()
    s = snapshot(run)
    assert s.steps.pace == Pace(waiting=WAITING)
    assert "steps        none yet (final step 3)\n             rate       waiting for a second step" in status_text(s)


def test_phases_the_record_lacks_are_read_from_the_attempt_directory_and_the_cancel(run: dict[str, Any]) -> None:
    """A cancel can stop the host before it records the tasks' phases: status reads them where they are."""
    trainer = {"trainer_started_at": "1970-01-01T00:07:30.000+00:00", "time": "1970-01-01T00:09:00.000+00:00"}
    write(run["attempt"] / "gang" / "stopped.json", {"signal": "SIGTERM", "exit_code": 143, **trainer})
    write(
        run["out"] / "cancellations" / f"{ATTEMPT}.json",
        {"by": {"user": "ann", "host": "h"}, "at": "1970-01-01T00:08:00.000+00:00"},
    )
    rewrite_attempt(run, phases={"submitted": "1970-01-01T00:00:00.000+00:00", "inputs_staged": "as recorded"})
    s = snapshot(run)
    assert s.phases == {
        "submitted": "1970-01-01T00:00:00.000+00:00",
        "inputs_staged": "as recorded",  # the record wins over the directory
        "first_optimizer_step": "1970-01-01T00:02:10.000+00:00",
        "trainer_started": "1970-01-01T00:07:30.000+00:00",
        "cancelled": "1970-01-01T00:08:00.000+00:00",
        "trainer_exited": "1970-01-01T00:09:00.000+00:00",
    }
