"""Cancel a run: its coordinator and child jobs, and a record of who cancelled it, when and why.

The backend's cancel cascades from the coordinator to its children; a child that is not a
registered child (a host started outside a job) is cancelled explicitly. The record is written
twice over: `{output_path}/cancellations/{attempt_id}.json`, created exclusively (the first
cancel wins, as on the backend), and a `cancelled` entry plus state `cancelled` in the run
record, written once the jobs have stopped (so after the interrupted host recorded its own
"failed"), unless the attempt had already succeeded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rlaunch import storage
from rlaunch.observe import run_jobs
from rlaunch.observe.resolve import RunRef
from rlaunch.processes import actor
from rlaunch.runs import run_record
from rlaunch.runs.layout import cancel_record
from rlaunch.storage import utc_now


@dataclass
class CancelOutcome:
    attempt_id: str | None
    requested: list[str] = field(default_factory=list)  # job ids a cancel was sent to
    states: dict[str, str] = field(default_factory=dict)  # job id -> state after the cancel
    record_url: str | None = None
    already_ended: bool = False


def live_jobs(ref: RunRef) -> tuple[dict[str, Any], list[run_jobs.JobView]]:
    """The selected attempt and its jobs that have not ended (coordinator first)."""
    attempt = ref.attempt() or {}
    if not attempt:  # submitted moments ago: only the coordinator exists, building the RL step's inputs
        if not ref.job_id:
            return attempt, []
        coordinator = run_jobs.view("coordinator", ref.job_id, run_jobs.find_job(ref.job_id, ref.prefix))
        return attempt, [coordinator] if coordinator.error is None and not coordinator.terminal else []
    _, coordinator, child = run_jobs.run_jobs(attempt, ref.prefix)
    return attempt, [j for j in (coordinator, child) if j is not None and j.error is None and not j.terminal]


def cancel_run(ref: RunRef, reason: str | None = None) -> CancelOutcome:
    attempt, live = live_jobs(ref)
    outcome = CancelOutcome(attempt_id=attempt.get("attempt_id"))
    if not live:
        outcome.already_ended = True
        return outcome
    requested_at = utc_now()
    who = actor()
    # The request is recorded before any job is told to stop: a reader that sees the interrupted
    # host's "failed" already finds who cancelled. The first request wins, as on the backend.
    url = cancel_record(ref.output_path, outcome.attempt_id or f"before-attempt-{live[0].job_id}")
    request = {
        "attempt_id": outcome.attempt_id,
        "artifact": attempt.get("artifact") or ref.artifact,
        "by": who,
        "at": requested_at,
        "reason": reason,
        "jobs": [j.job_id for j in live],
    }
    if storage.create_exclusive(url, storage.dumps(request)):
        outcome.record_url = url
    candidates = run_jobs.backends(attempt.get("backend") or "local", attempt.get("placement"), ref.prefix)
    because = f"rlaunch cancel by {who['user']}@{who['host']}" + (f": {reason}" if reason else "")
    for job in live:  # coordinator first: its cancel cascades to the child
        found = run_jobs.lookup(job.job_id, candidates)
        if found is None:
            continue
        backend, status = found
        if not status.state.terminal:
            outcome.requested.append(job.job_id)
            outcome.states[job.job_id] = backend.cancel(job.job_id, reason=because).state.value
        else:
            outcome.states[job.job_id] = status.state.value
    if outcome.attempt_id:
        current = (run_record.read(ref.output_path) or {}).get("attempts") or []
        entry: dict[str, Any] = next((a for a in current if a.get("attempt_id") == outcome.attempt_id), {})
        fields: dict[str, Any] = {
            "cancelled": {"by": who, "at": requested_at, "reason": reason, "states_after": outcome.states}
        }
        if entry.get("state") != "succeeded":  # a host interrupted by the cancel records "failed"
            fields["state"] = "cancelled"
        if not entry.get("finished_at"):
            fields["finished_at"] = utc_now()
        run_record.update_attempt(ref.output_path, (ref.record or {}).get("run_id", ""), outcome.attempt_id, fields)
    return outcome
