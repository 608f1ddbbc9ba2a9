"""`rlaunch runs`: the list of every run recorded under a prefix, newest first, with its state, job ids
and the sweep it belongs to."""

from __future__ import annotations

from typing import Any

from rlaunch.dotted import get_path
from rlaunch.observe import run_jobs
from rlaunch.observe.collect import effective_state
from rlaunch.observe.resolve import at_path, prefix_of, run_records
from rlaunch.observe.run_files import read_json
from rlaunch.observe.run_status import TERMINAL_STATES, Cancellation, Terminal
from rlaunch.observe.sweeps import MalformedSweepError, sweep_of
from rlaunch.runs.layout import RUN_RECORD, cancel_record, run_record, terminal_manifest
from rlaunch.statefiles import CorruptStateError

_ROW_KEYS = (
    "artifact",
    "output_path",
    "run_id",
    "state",
    "state_reason",
    "record_state",
    "attempt_id",
    "attempts",
    "submitted_at",
    "finished_at",
    "coordinator_job_id",
    "child_job_id",
    "backend",
    "runtime_profile",
    "runtime_digest",
    "fingerprint",
    "sweep",
    "sweep_problem",
)


def summary(output_path: str, record: dict[str, Any], prefix: str | None) -> dict[str, Any] | None:
    """One row: the latest attempt, its state reconciled with its jobs when the record is not final."""
    attempts = record.get("attempts") or []
    if not attempts:
        return None
    latest = attempts[-1]
    attempt_id = latest.get("attempt_id")
    state, reason = latest.get("state"), None
    if state not in TERMINAL_STATES:
        _, coordinator, child = run_jobs.run_jobs(latest, prefix or prefix_of(output_path, latest.get("artifact")))
        cancel = read_json(cancel_record(output_path, attempt_id)) if attempt_id else None
        manifest = read_json(terminal_manifest(output_path)) or {}
        terminal = Terminal(
            exists=bool(manifest),
            state=get_path(manifest, "result.state", None),
            attempt_id=get_path(manifest, "result.attempt_id", None),
        )
        cancelled = Cancellation(by="?", at=cancel.get("at")) if isinstance(cancel, dict) else None
        state, reason = effective_state(state, coordinator, child, terminal, cancelled, attempt_id)
    try:
        member = sweep_of(record, run_record(output_path))
        sweep, sweep_problem = (member.to_dict() if member else None), None
    except MalformedSweepError as exc:  # told by the caller; the run is listed as one of no sweep
        sweep, sweep_problem = None, str(exc)
    return {
        "artifact": latest.get("artifact"),
        "output_path": output_path,
        "run_id": record.get("run_id"),
        "state": state,
        "state_reason": reason,
        "record_state": latest.get("state"),
        "attempt_id": attempt_id,
        "attempts": len(attempts),
        "submitted_at": latest.get("submitted_at"),
        "finished_at": latest.get("finished_at"),
        "coordinator_job_id": latest.get("coordinator_job_id"),
        "child_job_id": latest.get("child_job_id"),
        "backend": latest.get("backend"),
        "runtime_profile": latest.get("runtime_profile"),
        "runtime_digest": latest.get("runtime_digest"),
        "fingerprint": latest.get("fingerprint"),
        "sweep": sweep,
        "sweep_problem": sweep_problem,
    }


def list_runs(
    prefix: str,
    name_prefix: str | None = None,
    damaged: list[CorruptStateError] | None = None,
    sweep: str | None = None,
) -> list[dict[str, Any]]:
    """Runs under `prefix` (optionally only artifacts whose name starts with `name_prefix`, only the
    variants of the sweep named `sweep`), newest first.

    A run whose record is damaged is listed as `damaged` (its latest attempt rebuilt from the run's
    other durable state, `observe.recover`) and its error added to `damaged` for the caller to report.
    """
    found: list[CorruptStateError] = []
    rows = [summary(output_path, record, prefix) for output_path, record in run_records(prefix, found)]
    rows += [damaged_summary(exc, prefix) for exc in found]
    if damaged is not None:
        damaged.extend(found)
    return sorted(
        (
            r
            for r in rows
            if r is not None
            and (r["artifact"] or "").startswith(name_prefix or "")
            and (sweep is None or (r["sweep"] or {}).get("name") == sweep)
        ),
        key=lambda r: r["submitted_at"] or "",
        reverse=True,
    )


def damaged_summary(exc: CorruptStateError, prefix: str) -> dict[str, Any]:
    """The row of a run whose record `exc` names: state `damaged`, the rest as other state says."""
    output_path = exc.source.removesuffix("/" + RUN_RECORD)
    ref = at_path(output_path, prefix=prefix)
    row = summary(output_path, ref.record or {}, prefix) or dict.fromkeys(_ROW_KEYS)
    row.update(output_path=output_path, artifact=ref.artifact, state="damaged", state_reason=str(exc))
    row["attempts"] = row["attempts"] or 0
    return row
