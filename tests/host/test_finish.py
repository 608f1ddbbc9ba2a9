"""The launch host's last step, in process (`host.launch._finish`): the attempt's manifests, then its
run-record entry. Manifests that hit a full disk fail the attempt, name the path and the next step,
and are classed as a full disk unless the trainer's failure was already classed; any other write
error is raised. A refused attempt says so; a submitted one records its tasks' phases and the W&B
run the trainer used. tests/launch/test_disk_full.py fills a real disk."""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import Any

import pytest

from rlaunch import storage
from rlaunch.host import launch
from rlaunch.host.manifests import FAILED, SUCCEEDED, LaunchResult
from rlaunch.launch_config import schema
from rlaunch.launch_config.failures import disk_full
from rlaunch.rules.memory import MemoryTable
from rlaunch.runs import run_record
from rlaunch.runs.layout import GANG_OUTCOME, WANDB_RUN, attempt_dir, attempt_manifest

FULL = OSError(errno.ENOSPC, "No space left on device", "/scratch/attempt.json")
MESSAGE = storage.disk_full_message(FULL)
DETERMINISTIC = {"kind": "deterministic", "cause": "oom", "evidence": "CUDA out of memory"}


@pytest.fixture
def doc(document: dict[str, Any]) -> schema.SkyRLLaunchConfig:
    return schema.from_dict(document)


def _result(doc: schema.SkyRLLaunchConfig, state: str = SUCCEEDED, **kw: Any) -> LaunchResult:
    return LaunchResult(doc.run.id, doc.run.attempt_id, state, "local", doc.runtime.profile, "d" * 64, **kw)


def _entry(doc: schema.SkyRLLaunchConfig) -> dict[str, Any]:
    (entry,) = (run_record.read(doc.artifacts.output_path) or {})["attempts"]
    return dict(entry)


def _disk_fills(monkeypatch: pytest.MonkeyPatch, error: OSError = FULL) -> None:
    def full(*_: Any) -> None:
        raise error

    monkeypatch.setattr(launch, "write_manifests", full)


def test_manifests_then_the_record_with_when_it_finished(doc: schema.SkyRLLaunchConfig) -> None:
    result = _result(doc)
    launch._finish(doc, result, MemoryTable(None))
    manifest = json.loads(Path(attempt_manifest(doc.artifacts.attempts_root, doc.run.attempt_id)).read_text())
    assert manifest["result"]["finished_at"] == result.finished_at is not None
    assert manifest["config"] == json.loads(json.dumps(doc.to_dict()))  # the document the attempt ran
    entry = _entry(doc)
    assert (entry["state"], entry["finished_at"], entry["phases"]) == (
        SUCCEEDED,
        result.finished_at,
        {"finished": result.finished_at},
    )
    assert "refused" not in entry and "wandb" not in entry and "failure_class" not in entry


def test_a_refused_attempt_says_so(doc: schema.SkyRLLaunchConfig) -> None:
    launch._finish(doc, _result(doc, state=FAILED, failure="refused"), MemoryTable(None), refused=True)
    assert _entry(doc)["refused"] is True


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_manifests_that_do_not_fit_fail_the_attempt_naming_the_path(
    doc: schema.SkyRLLaunchConfig, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    error = OSError(code, "full", "/scratch/attempt.json")
    _disk_fills(monkeypatch, error)
    result = _result(doc)
    launch._finish(doc, result, MemoryTable(None))
    message = storage.disk_full_message(error)
    assert (result.state, result.failure) == (FAILED, message)
    assert result.failure_class == disk_full(message, "/scratch/attempt.json").to_json()
    entry = _entry(doc)
    assert (entry["state"], entry["failure"], entry["failure_class"]) == (FAILED, message, result.failure_class)
    assert entry["failure_class"]["where"] == "/scratch/attempt.json"


@pytest.mark.parametrize("earlier", [None, {"kind": "unclassified"}])
def test_a_trainers_unclassed_failure_keeps_its_words_and_is_classed_a_full_disk(
    doc: schema.SkyRLLaunchConfig, monkeypatch: pytest.MonkeyPatch, earlier: dict[str, Any] | None
) -> None:
    _disk_fills(monkeypatch)
    result = _result(doc, state=FAILED, failure="trainer exited 1", failure_class=earlier)
    launch._finish(doc, result, MemoryTable(None))
    assert result.failure == f"trainer exited 1; {MESSAGE}"
    assert result.failure_class == disk_full(MESSAGE, FULL.filename).to_json()


def test_a_cause_the_trainers_failure_already_named_stays(
    doc: schema.SkyRLLaunchConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    _disk_fills(monkeypatch)
    result = _result(doc, state=FAILED, failure="CUDA out of memory", failure_class=dict(DETERMINISTIC))
    launch._finish(doc, result, MemoryTable(None))
    assert (result.state, result.failure_class) == (FAILED, DETERMINISTIC)
    assert _entry(doc)["failure"] == f"CUDA out of memory; {MESSAGE}"


def test_any_other_write_error_is_raised_and_nothing_recorded(
    doc: schema.SkyRLLaunchConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    _disk_fills(monkeypatch, OSError(errno.EIO, "input/output error", "/scratch/attempt.json"))
    with pytest.raises(OSError, match="input/output error"):
        launch._finish(doc, _result(doc), MemoryTable(None))
    assert run_record.read(doc.artifacts.output_path) is None


def _evidence(doc: schema.SkyRLLaunchConfig, name: str, value: Any) -> None:
    directory = attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id)
    storage.write_json_atomic(storage.join(directory, name), value)


def test_a_submitted_attempt_records_its_tasks_phases_and_the_wandb_run_the_trainer_used(
    doc: schema.SkyRLLaunchConfig,
) -> None:
    wandb = {"entity": "team", "project": "rl", "id": "abc123"}
    _evidence(doc, WANDB_RUN, wandb)
    _evidence(doc, GANG_OUTCOME, {"trainer_started_at": "2026-12-05T08:00:00+00:00", "exit_code": 0})
    result = _result(doc, child_job_id="child-1")
    launch._finish(doc, result, MemoryTable(None))
    entry = _entry(doc)
    assert entry["wandb"] == wandb
    assert entry["phases"] == {"finished": result.finished_at, "trainer_started": "2026-12-05T08:00:00+00:00"}


@pytest.mark.parametrize(("child", "wandb"), [(None, {"id": "abc123"}), ("child-1", ["not", "a", "run"])])
def test_no_wandb_run_without_a_child_job_or_a_run_the_trainer_wrote(
    doc: schema.SkyRLLaunchConfig, child: str | None, wandb: Any
) -> None:
    _evidence(doc, WANDB_RUN, wandb)
    _evidence(doc, GANG_OUTCOME, {"trainer_started_at": "2026-12-05T08:00:00+00:00"})
    result = _result(doc, child_job_id=child)
    launch._finish(doc, result, MemoryTable(None))
    entry = _entry(doc)
    assert "wandb" not in entry
    assert ("trainer_started" in entry["phases"]) is (child is not None)


class _Backend:
    def environment(self) -> dict[str, str]:
        return {"RLAUNCH_LOCAL_ROOT": "/jobs"}


def test_the_record_says_where_the_attempts_jobs_can_be_found_again(doc: schema.SkyRLLaunchConfig) -> None:
    launch._finish(doc, _result(doc), MemoryTable(None), _Backend())  # type: ignore[arg-type]
    assert _entry(doc)["backend_settings"] == {"RLAUNCH_LOCAL_ROOT": "/jobs"}
