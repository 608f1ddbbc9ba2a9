"""Finalising attempts whose processes are all gone.

The launch host records an attempt's outcome itself. When it cannot (it, its coordinator and the
supervisors were killed with SIGKILL, or the machine went down), the record would say "running"
forever. The next `rlaunch status` of the run, and the next launch of it, look at the attempt's
jobs: once the coordinator job (which runs the host) has ended, the host can write nothing more,
so the record is closed with the reconciled state and the reason. A verdict the host already
wrote is never overridden (`run_record.close_attempt`). On a prefix this user cannot write (a
shared bucket mounted for readers, or a full disk) the view shows the reconciled state and writes nothing.
"""

from __future__ import annotations

from typing import Any

from rlaunch.observe import run_jobs
from rlaunch.observe.collect import effective_state, observed_failure_class
from rlaunch.observe.run_status import RunStatus, Terminal
from rlaunch.processes import actor
from rlaunch.runs import run_record
from rlaunch.statefiles import CorruptStateError
from rlaunch.storage import cannot_write, utc_now

ENDED = ("failed", "cancelled")


def _fields(state: str, reason: str | None, coordinator: run_jobs.JobView, by: str) -> dict[str, Any]:
    detail = f"; coordinator {coordinator.job_id}: {coordinator.message}" if coordinator.message else ""
    who = actor()
    return {
        "state": state,
        "failure": f"{reason or 'its jobs ended without a recorded outcome'}{detail}",
        "finished_at": coordinator.finished_at or utc_now(),
        "finalised_by": f"{by} ({who['user']}@{who['host']}, {utc_now()})",
    }


def _ended(state: str, coordinator: run_jobs.JobView | None) -> bool:
    return state in ENDED and coordinator is not None and coordinator.error is None and coordinator.terminal


def finalise_snapshot(snapshot: RunStatus, by: str = "rlaunch status") -> bool:
    """Close the shown attempt when its record is open but its coordinator job has ended."""
    if snapshot.damage or not snapshot.attempt_id or snapshot.record_state in run_record.FINAL_STATES:
        return False
    if not _ended(snapshot.state, snapshot.coordinator):
        return False
    assert snapshot.coordinator is not None
    fields = _fields(snapshot.state, snapshot.state_reason, snapshot.coordinator, by)
    if snapshot.failure:
        fields["failure"] = snapshot.failure
    try:
        closed = run_record.close_attempt(snapshot.output_path, snapshot.attempt_id, fields)
    except OSError as exc:
        if not cannot_write(exc):
            raise
        closed = False
        snapshot.failure = fields["failure"]  # a read-only or full prefix: shown as a writer would record it
    if closed:
        snapshot.record_state, snapshot.failure = fields["state"], fields["failure"]
    if snapshot.failure == fields["failure"] and snapshot.state == "failed":
        snapshot.failure_class = observed_failure_class(snapshot)  # classed by what the jobs said
    return closed


def finalise_open_attempts(output_path: str, prefix: str | None, by: str) -> list[str]:
    """Close every open attempt of the run whose coordinator job has ended; returns their ids."""
    try:
        record = run_record.read(output_path) or {}
    except CorruptStateError:
        return []  # the next write keeps the damaged record aside and starts a new one
    closed = []
    for attempt in record.get("attempts") or []:
        attempt_id = attempt.get("attempt_id")
        if not attempt_id or attempt.get("state") in run_record.FINAL_STATES:
            continue
        _, coordinator, child = run_jobs.run_jobs(attempt, prefix)
        state, reason = effective_state(attempt.get("state"), coordinator, child, Terminal(), None, attempt_id)
        if _ended(state, coordinator):
            assert coordinator is not None
            if run_record.close_attempt(output_path, attempt_id, _fields(state, reason, coordinator, by)):
                closed.append(attempt_id)
    return closed
