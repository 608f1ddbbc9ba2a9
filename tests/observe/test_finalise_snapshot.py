"""Closing an attempt whose jobs are gone, in process (`control.finalise`): a run record laid out by
hand and a snapshot as `status` reconciled it. Only an open attempt whose coordinator job has ended
(failed or cancelled, read without error) is closed, with the reason, the coordinator's word, when it
ended and who closed it; a prefix that cannot be written shows the same and writes nothing.
tests/cluster/test_state_files.py closes one after real killed supervisors."""

from __future__ import annotations

import errno
import re
from pathlib import Path
from typing import Any

import pytest

from rlaunch.control.finalise import finalise_open_attempts, finalise_snapshot
from rlaunch.launch_config.failures import classify
from rlaunch.observe import run_jobs
from rlaunch.observe.run_jobs import JobView, ReplicaView
from rlaunch.observe.run_status import RunStatus
from rlaunch.processes import actor
from rlaunch.runs import run_record

ENDED_AT = "2026-12-05T08:00:00+00:00"


def _open(out: Path, state: str = "running", attempt: str = "a1") -> str:
    run_record.update_attempt(str(out), "r1", attempt, {"state": state, "coordinator_job_id": "c1"})
    return str(out)


def _coordinator(state: str = "failed", message: str | None = "exit 137", **kw: Any) -> JobView:
    return JobView("coordinator", "c1", state=state, message=message, finished_at=ENDED_AT, **kw)


def _snapshot(out: str, **kw: Any) -> RunStatus:
    fields: dict[str, Any] = {
        "attempt_id": "a1",
        "state": "failed",
        "state_reason": "the coordinator job failed",
        "record_state": "running",
        "coordinator": _coordinator(),
        **kw,
    }
    return RunStatus("marker/rl@1", out, **fields)


def _entry(out: str) -> dict[str, Any]:
    (entry,) = (run_record.read(out) or {})["attempts"]
    return dict(entry)


def _by(prefix: str) -> str:
    who = actor()
    return rf"{re.escape(prefix)} \({re.escape(who['user'])}@{re.escape(who['host'])}, \d{{4}}-\d\d-\d\dT[^)]+\)"


def test_an_open_attempt_whose_coordinator_failed_is_closed_with_its_reason_and_who_closed_it(tmp_path: Path) -> None:
    out = _open(tmp_path)
    snapshot = _snapshot(
        out, child=JobView("child", "j1", state="failed", replicas=[ReplicaView(0, "failed", exit_code=137)])
    )
    assert finalise_snapshot(snapshot) is True
    entry = _entry(out)
    failure = "the coordinator job failed; coordinator c1: exit 137"
    assert (entry["state"], entry["failure"], entry["finished_at"]) == ("failed", failure, ENDED_AT)
    assert re.fullmatch(_by("rlaunch status"), entry["finalised_by"])
    assert (snapshot.record_state, snapshot.failure) == ("failed", failure)
    assert snapshot.failure_class == classify(failure, exit_codes=[137])


def test_without_a_reason_a_message_or_an_end_time_the_record_says_so_and_when(tmp_path: Path) -> None:
    out = _open(tmp_path)
    coordinator = JobView("coordinator", "c1", state="cancelled")
    snapshot = _snapshot(out, state="cancelled", state_reason=None, coordinator=coordinator)
    assert finalise_snapshot(snapshot, by="launch of attempt a2") is True
    entry = _entry(out)
    assert (entry["state"], entry["failure"]) == ("cancelled", "its jobs ended without a recorded outcome")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d.*", entry["finished_at"])
    assert re.fullmatch(_by("launch of attempt a2"), entry["finalised_by"])
    assert snapshot.failure_class is None  # a cancelled attempt is not classed as a failure


def test_the_failure_status_already_found_is_the_one_recorded(tmp_path: Path) -> None:
    out = _open(tmp_path)
    snapshot = _snapshot(out, failure="Traceback: CUDA out of memory")
    assert finalise_snapshot(snapshot) is True
    assert _entry(out)["failure"] == snapshot.failure == "Traceback: CUDA out of memory"
    assert snapshot.failure_class == classify("Traceback: CUDA out of memory", exit_codes=[])


@pytest.mark.parametrize(
    "change",
    [
        {"damage": "the run record is damaged"},
        {"attempt_id": None},
        {"attempt_id": ""},
        *({"record_state": state} for state in run_record.FINAL_STATES),
        {"state": "running"},
        {"state": "succeeded"},
        {"state": "unknown"},
        {"coordinator": None},
        {"coordinator": _coordinator(state="running")},
        {"coordinator": _coordinator(error="cannot reach the local backend")},
    ],
)
def test_nothing_else_is_closed_and_nothing_is_written(tmp_path: Path, change: dict[str, Any]) -> None:
    out = _open(tmp_path)
    snapshot = _snapshot(out, **change)
    assert finalise_snapshot(snapshot) is False
    assert _entry(out) == {"attempt_id": "a1", "state": "running", "coordinator_job_id": "c1"}
    assert (snapshot.failure, snapshot.failure_class) == (None, None)


def test_a_verdict_the_host_wrote_meanwhile_is_kept(tmp_path: Path) -> None:
    out = _open(tmp_path, state="succeeded")
    snapshot = _snapshot(out)  # reconciled while the record still looked open
    assert finalise_snapshot(snapshot) is False
    assert _entry(out)["state"] == "succeeded" and "finalised_by" not in _entry(out)
    assert (snapshot.record_state, snapshot.failure, snapshot.failure_class) == ("running", None, None)


@pytest.mark.parametrize("error", [PermissionError(errno.EACCES, "denied"), OSError(errno.EROFS, "read-only")])
def test_a_prefix_that_cannot_be_written_shows_what_a_writer_would_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: OSError
) -> None:
    out = _open(tmp_path)

    def refuse(*_: Any) -> bool:
        raise error

    monkeypatch.setattr(run_record, "close_attempt", refuse)
    snapshot = _snapshot(out)
    assert finalise_snapshot(snapshot) is False
    assert snapshot.failure == "the coordinator job failed; coordinator c1: exit 137"
    assert snapshot.record_state == "running"  # shown failed, not recorded
    assert snapshot.failure_class == classify(snapshot.failure, exit_codes=[])
    assert _entry(out)["state"] == "running"


def test_any_other_write_error_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = _open(tmp_path)

    def broken(*_: Any) -> bool:
        raise OSError(errno.EIO, "input/output error")

    monkeypatch.setattr(run_record, "close_attempt", broken)
    with pytest.raises(OSError, match="input/output error"):
        finalise_snapshot(_snapshot(out))


def test_the_next_launch_closes_each_open_attempt_whose_jobs_all_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = str(tmp_path)
    attempts = (("a1", "running"), ("a2", "failed"), ("a3", "running"), ("a4", "running"), ("a5", "running"))
    for attempt, state in attempts:
        run_record.update_attempt(out, "r1", attempt, {"state": state, "coordinator_job_id": f"c-{attempt}"})
    run_record.update_attempt(out, "r1", "", {"state": "running"})  # an entry without an id: skipped
    jobs_of = {
        "a1": (JobView("coordinator", "c-a1", state="failed", message="killed", finished_at=ENDED_AT), "failed"),
        "a3": (JobView("coordinator", "c-a3", state="running"), None),
        "a4": (JobView("coordinator", "c-a4", state="cancelled", error="cannot reach the local backend"), None),
        "a5": (JobView("coordinator", "c-a5", state="failed"), "running"),  # its trainers still run
    }
    asked: list[tuple[str, str | None]] = []

    def jobs(attempt: dict[str, Any], prefix: str | None) -> tuple[list[Any], JobView | None, JobView | None]:
        asked.append((attempt["attempt_id"], prefix))
        coordinator, child = jobs_of[attempt["attempt_id"]]
        return [], coordinator, JobView("child", "j", state=child) if child else None

    monkeypatch.setattr(run_jobs, "run_jobs", jobs)
    assert finalise_open_attempts(out, "/prefix", by="launch of attempt a6") == ["a1"]
    assert asked == [("a1", "/prefix"), ("a3", "/prefix"), ("a4", "/prefix"), ("a5", "/prefix")]  # final: not looked up
    entries = {e["attempt_id"]: e for e in (run_record.read(out) or {})["attempts"]}
    assert (entries["a1"]["state"], entries["a1"]["finished_at"], entries["a1"]["failure"]) == (
        "failed",
        ENDED_AT,
        "jobs ended (coordinator failed, child failed) but the run record was never finalised (running); "
        "coordinator c-a1: killed",
    )
    assert re.fullmatch(_by("launch of attempt a6"), entries["a1"]["finalised_by"])
    assert [entries[a]["state"] for a in ("a2", "a3", "a4", "a5")] == ["failed", "running", "running", "running"]


def test_a_damaged_record_is_left_for_the_next_write(tmp_path: Path) -> None:
    (tmp_path / "run_record.json").write_text("{not json")
    assert finalise_open_attempts(str(tmp_path), None, by="launch") == []
    assert (tmp_path / "run_record.json").read_text() == "{not json"
