"""The durable run record: one entry per attempt, under the RL artifact's path.

The experiment side writes what it knows before handing over (artifact identity, fingerprint,
argv, topology and role plan); the host adds job ids and the final state. Each write merges into
the attempt's entry and rewrites the small file atomically.

Each entry also carries `phases`: when each step of a launch happened (ISO-8601 UTC), so that
`rlaunch status` and the overhead benchmark can say where the launcher's seconds go:

    submitted             the coordinator job was submitted          (its backend's record)
    coordinator_started   the coordinator's process started          (its backend's record)
    graph_planned         the coordinator planned the artifact graph
    host_started          the launch host started
    child_submitted       the host submitted the child gang
    replica_<r>_joined    replica r's task began                     (its join marker)
    inputs_staged         the last replica had its inputs staged     (the join markers)
    trainer_started       rank 0 started the runtime's entrypoint
    first_optimizer_step  the trainer logged its first step          (metrics.jsonl)
    trainer_exited        the runtime's entrypoint exited            (rank 0's outcome)
    finished              the host recorded the attempt's end
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any

from rlaunch import storage
from rlaunch.launch_config.layout import GANG_OUTCOME, JOINED, METRICS, attempt_dir, run_record

PHASES = (
    "launch_process_started",  # the benchmark's: when `--run` was started
    "submitted",
    "coordinator_started",
    "graph_planned",
    "host_started",
    "child_submitted",
    "replica_joined",  # one per rank: replica_<r>_joined
    "inputs_staged",
    "trainer_started",
    "first_optimizer_step",
    "trainer_exited",
    "finished",
    "launch_process_exited",  # the benchmark's: when `--run` returned
)


_REPLICA_MARKER = re.compile(r"^replica-(\d+)\.json$")
_PROCESS_PHASES: dict[str, str] = {}  # what this process marked (the coordinator: graph_planned)


def mark(phase: str) -> None:
    """Note that `phase` happened in this process now (read back by `marked`)."""
    _PROCESS_PHASES[phase] = storage.utc_now()


def marked() -> dict[str, str]:
    return dict(_PROCESS_PHASES)


def _iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).isoformat(timespec="milliseconds")


def task_phases(attempts_root: str, attempt_id: str) -> dict[str, str]:
    """The phases the gang's tasks and the trainer left in the attempt directory (missing: absent)."""
    directory = attempt_dir(attempts_root, attempt_id)
    phases: dict[str, str] = {}
    joined = storage.join(directory, JOINED)
    staged = []
    for name in storage.list_names(joined):
        match = _REPLICA_MARKER.match(name)
        marker = storage.read_json(storage.join(joined, name)) if match else None
        if not match or not isinstance(marker, dict):
            continue
        if marker.get("started_at"):
            phases[f"replica_{match.group(1)}_joined"] = marker["started_at"]
        if marker.get("time"):
            staged.append(marker["time"])
    if staged:
        phases["inputs_staged"] = max(staged)
    outcome = storage.read_json(storage.join(directory, GANG_OUTCOME)) or {}
    if outcome.get("trainer_started_at"):
        phases["trainer_started"] = outcome["trainer_started_at"]
    if outcome.get("time"):
        phases["trainer_exited"] = outcome["time"]
    first = _first_metrics_line(storage.join(directory, METRICS))
    if isinstance(first.get("time"), (int, float)):
        phases["first_optimizer_step"] = _iso(float(first["time"]))
    return phases


def _first_metrics_line(url: str) -> dict[str, Any]:
    if not storage.exists(url):
        return {}
    for line in storage.read_text(url).splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {}


def update_attempt(output_path: str, run_id: str, attempt_id: str, fields: dict[str, Any]) -> None:
    """Merge `fields` into the attempt's entry (`phases` merge key by key)."""
    url = run_record(output_path)
    record = storage.read_json(url) or {"run_id": run_id, "attempts": []}
    attempts = record["attempts"]
    for entry in attempts:
        if entry.get("attempt_id") == attempt_id:
            phases = {**(entry.get("phases") or {}), **(fields.get("phases") or {})}
            entry.update(fields)
            if phases:
                entry["phases"] = phases
            break
    else:
        attempts.append({"attempt_id": attempt_id, **fields})
    storage.write_json_atomic(url, record)


def add_gate_override(output_path: str, run_id: str, entry: dict[str, Any]) -> None:
    """Keep a `--skip-smoke-gate` override (reason, who, when, what the gate found) with the run."""
    url = run_record(output_path)
    record = storage.read_json(url) or {"run_id": run_id, "attempts": []}
    record.setdefault("smoke_gate_overrides", []).append(entry)
    storage.write_json_atomic(url, record)


def read(output_path: str) -> dict[str, Any] | None:
    return storage.read_json(run_record(output_path))


def _order(name: str) -> int:
    if name.startswith("replica_") and name.endswith("_joined"):
        return PHASES.index("replica_joined")
    return PHASES.index(name) if name in PHASES else len(PHASES)


def _moment(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value)


def phase_table(phases: dict[str, str]) -> list[tuple[str, str, float, float]]:
    """(phase, time, seconds since the previous phase, seconds since the first), in launch order.

    Phases are ordered by the launch's sequence (then by time), so a clock skew between machines
    shows as a negative step instead of reordering the table."""
    known = [(name, at) for name, at in phases.items() if at]
    known.sort(key=lambda item: (_order(item[0]), _moment(item[1])))
    rows: list[tuple[str, str, float, float]] = []
    for index, (name, at) in enumerate(known):
        moment = _moment(at)
        since_previous = (moment - _moment(known[index - 1][1])).total_seconds() if index else 0.0
        rows.append((name, at, since_previous, (moment - _moment(known[0][1])).total_seconds()))
    return rows


def format_phase_table(phases: dict[str, str]) -> list[str]:
    """The phase table as text lines: `phase  +step  (total)`."""
    rows = phase_table(phases)
    width = max((len(name) for name, *_ in rows), default=0)
    return [f"{name:<{width}}  {step:+7.2f}s  (at {total:7.2f}s)" for name, _, step, total in rows]
