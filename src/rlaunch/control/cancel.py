"""Cancel a run: its coordinator and child jobs, and a record of who cancelled it, when and why.

The backend's cancel cascades from the coordinator to its children; a child that is not a
registered child (a host started outside a job) is cancelled explicitly. The record is written
twice over: `{output_path}/cancellations/{attempt_id}.json`, created exclusively (the first
cancel wins, as on the backend), and a `cancelled` entry plus state `cancelled` in the run
record, written once the jobs have stopped (so after the interrupted host recorded its own
"failed"), unless the attempt had already succeeded. That entry is decided under the record's lock
over the entry as it then stands: an attempt that succeeded meanwhile stays succeeded, and a
second cancel (of jobs the first did not stop) keeps the earliest request's who, when and why.

`rlaunch cancel <sweep name>` (`cancel_sweep`) cancels a whole sweep: each running variant as above,
each recorded in its own run record, and the sweep's coordinator; one variant is cancelled by its
own identity (`smoke/rl.lr-1e-3@VERSION`), like any run.

A cancel works at every moment of an attempt: before the host named the attempt's jobs (nothing
recorded yet, or only the coordinator's first entry), it stops the coordinator the reference named
or the running one labelled with the run (found, and stopped, on the backends a job without a
record is looked for on: local and Slurm), and records the attempt that coordinator recorded. A
cancel that cannot find or reach the jobs of an open attempt says so (`RunJobs.cannot_act`) and
the command exits 1, never "nothing to cancel".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from rlaunch import storage
from rlaunch.cluster.protocol import Backend
from rlaunch.observe import run_jobs
from rlaunch.observe.resolve import RunRef, at_path, pending_coordinator, run_records
from rlaunch.processes import actor
from rlaunch.runs import run_record
from rlaunch.runs.layout import cancel_record
from rlaunch.runs.sweep import LABEL as SWEEP_LABEL
from rlaunch.runs.sweep import SweepMembership, of_record
from rlaunch.storage import utc_now


@dataclass
class CancelOutcome:
    attempt_id: str | None
    requested: list[str] = field(default_factory=list)  # job ids a cancel was sent to
    states: dict[str, str] = field(default_factory=dict)  # job id -> state after the cancel
    record_url: str | None = None
    already_ended: bool = False


@dataclass(frozen=True)
class RunJobs:
    """The selected attempt and its jobs as a cancel sees them."""

    attempt: dict[str, Any]
    live: list[run_jobs.JobView]  # not ended (coordinator first)
    unreachable: list[run_jobs.JobView]  # named by the record but not found or not readable
    backends: list[Backend]  # where the jobs were looked for: where a cancel reaches them

    def cannot_act(self) -> str | None:
        """Why nothing can be cancelled although the attempt may still run (None: it can, or it ended)."""
        if self.live or not self.attempt or self.attempt.get("state") in run_record.FINAL_STATES:
            return None
        if self.unreachable:
            return "; ".join(f"{j.role} {j.job_id}: {j.error}" for j in self.unreachable)
        if not (self.attempt.get("coordinator_job_id") or self.attempt.get("child_job_id")):
            return "the record names none of its jobs yet and no running coordinator is labelled with the run"
        return None


def run_jobs_of(ref: RunRef, whole_sweep: bool = False) -> RunJobs:
    """The selected attempt and its jobs. Before the host named them (nothing recorded yet, or the
    attempt the coordinator recorded first), the coordinator is the one the reference named or the
    running one labelled with the run. A sweep's variant alone (not `whole_sweep`) leaves out the
    coordinator, which builds the other variants too: a cancel stops only the variant's child."""
    found = _run_jobs_of(ref)
    if whole_sweep or _sweep_of(ref) is None:
        return found
    return replace(found, live=[j for j in found.live if j.role != "coordinator"])


def _run_jobs_of(ref: RunRef) -> RunJobs:
    attempt = ref.attempt() or {}
    if attempt.get("coordinator_job_id") or attempt.get("child_job_id"):
        backends, coordinator, child = run_jobs.run_jobs(attempt, ref.prefix)
        views = [j for j in (coordinator, child) if j is not None]
    else:
        labelled = ref.job_id is None and ref.artifact and ref.prefix
        pending = (
            pending_coordinator(ref.artifact, ref.output_path, ref.prefix)
            if labelled and ref.artifact and ref.prefix
            else None
        )
        job_id = ref.job_id or (pending.job_id if pending else None)
        views = [run_jobs.view("coordinator", job_id, run_jobs.find_job(job_id, ref.prefix))] if job_id else []
        backends = run_jobs.unrecorded_backends(ref.prefix) if job_id else []
    return RunJobs(
        attempt,
        [j for j in views if j.error is None and not j.terminal],
        [j for j in views if j.error is not None],
        backends,
    )


def _cancelled(entry: dict[str, Any], request: dict[str, Any], states_after: dict[str, str]) -> dict[str, Any]:
    """What a cancel merges into its attempt's entry as it stands under the record's lock: the earliest
    request's who, when and why (a later cancel adds what the jobs became), state `cancelled` unless
    the attempt succeeded (a host the cancel interrupted records "failed"), and its end unless recorded."""
    first = entry.get("cancelled") or {}
    earliest = first if first.get("at") and first["at"] <= request["at"] else request
    fields: dict[str, Any] = {
        "cancelled": {**{key: earliest.get(key) for key in ("by", "at", "reason")}, "states_after": states_after}
    }
    if entry.get("state") != "succeeded":
        fields["state"] = "cancelled"
    if not entry.get("finished_at"):
        fields["finished_at"] = utc_now()
    return fields


def cancel_run(ref: RunRef, reason: str | None = None, found: RunJobs | None = None) -> CancelOutcome:
    """Stop the jobs of `ref`'s latest attempt (`found`: as seen before another cancel stopped
    them, a sweep's) and record who, when and why."""
    found = found if found is not None else run_jobs_of(ref)
    attempt, live = found.attempt, found.live
    outcome = CancelOutcome(attempt_id=attempt.get("attempt_id"))
    if not live:
        outcome.already_ended = True
        return outcome
    who = actor()
    request = {"by": who, "at": utc_now(), "reason": reason}
    # The request is recorded before any job is told to stop: a reader that sees the interrupted
    # host's "failed" already finds who cancelled. The first request wins, as on the backend.
    url = cancel_record(ref.output_path, outcome.attempt_id or f"before-attempt-{live[0].job_id}")
    artifact = attempt.get("artifact") or ref.artifact
    recorded = {"attempt_id": outcome.attempt_id, "artifact": artifact, **request, "jobs": [j.job_id for j in live]}
    if storage.create_exclusive(url, storage.dumps(recorded)):
        outcome.record_url = url
    because = f"rlaunch cancel by {who['user']}@{who['host']}" + (f": {reason}" if reason else "")
    for job in live:  # coordinator first: its cancel cascades to the child
        looked_up = run_jobs.lookup(job.job_id, found.backends)
        if looked_up is None:
            continue
        backend, status = looked_up
        if not status.state.terminal:
            outcome.requested.append(job.job_id)
            outcome.states[job.job_id] = backend.cancel(job.job_id, reason=because).state.value
        else:
            outcome.states[job.job_id] = status.state.value
    if not outcome.attempt_id:  # cancelled before its attempt was recorded: the coordinator may have recorded it since
        current = (run_record.read(ref.output_path) or {}).get("attempts") or []
        outcome.attempt_id = next(
            (a.get("attempt_id") for a in current if a.get("coordinator_job_id") in outcome.requested), None
        )
    if outcome.attempt_id:
        run_record.amend_attempt(
            ref.output_path,
            (ref.record or {}).get("run_id", ""),
            outcome.attempt_id,
            lambda entry: _cancelled(entry, request, outcome.states),
        )
    return outcome


@dataclass(frozen=True)
class SweepCancel:
    """What `rlaunch cancel <sweep>` did: each running variant's cancel, and the coordinators stopped
    that no variant's record named yet (building shared steps, or with every variant queued)."""

    variants: list[tuple[str, CancelOutcome]]
    coordinators: list[str]


def _sweep_of(ref: RunRef) -> SweepMembership | None:
    try:
        return of_record(ref.record)
    except ValueError:
        return None  # a damaged membership names no sweep: the run is cancelled on its own


def sweep_runs(name: str, prefix: str) -> list[RunRef]:
    """The runs under `prefix` whose records say they are variants of the sweep `name`."""
    refs = []
    for output_path, record in run_records(prefix):
        try:
            member = of_record(record)
        except ValueError:
            continue  # a damaged membership names no sweep: the run is cancelled on its own
        if member is not None and member.name == name:
            refs.append(at_path(output_path, prefix=prefix))
    return refs


def cancel_sweep(name: str, prefix: str, reason: str | None = None) -> SweepCancel:
    """Cancel every running variant of the sweep `name` and its coordinator. Every variant's jobs are
    found before any is stopped (the coordinator's cancel cascades to all of them), so each running
    variant's record gets its own cancel; a coordinator labelled with the sweep is stopped too."""
    found = [(ref, run_jobs_of(ref, whole_sweep=True)) for ref in sweep_runs(name, prefix)]
    variants = [(ref.artifact or ref.output_path, cancel_run(ref, reason, jobs)) for ref, jobs in found if jobs.live]
    who = actor()
    because = f"rlaunch cancel by {who['user']}@{who['host']}" + (f": {reason}" if reason else "")
    stopped = []
    for backend in run_jobs.unrecorded_backends(prefix):
        for job in backend.list_jobs():
            if job.labels.get(SWEEP_LABEL) == name and not job.state.terminal:
                backend.cancel(job.job_id, reason=because)
                stopped.append(job.job_id)
    return SweepCancel(variants, stopped)
