"""The durable run record: one entry per attempt, under the RL artifact's path.

The experiment side writes what it knows before handing over (artifact identity, fingerprint,
argv, topology and role plan); the host adds job ids and the final state; an observer that finds
every job of an open attempt ended finalises it (`close_attempt`). Each write is a
read-modify-write under a lock (an OS file lock for local storage, an exclusive lock file on an
object store), merges into the attempt's entry, scrubs credentials and rewrites the small file
atomically. A record that no longer parses is kept aside (`run_record.json.corrupt-<time>`) and a
new one is started, so a damaged record never stops the next launch.

Each entry also carries `phases`: when each step of a launch happened (ISO-8601 UTC), so that
`rlaunch status` and the overhead benchmark can say where the launcher's seconds go:

    submitted             the coordinator job was submitted          (its backend's record)
    coordinator_started   the coordinator's process started          (its backend's record)
    graph_planned         the coordinator planned the artifact graph
    host_started          the launch host started
    child_submitted       the host submitted the child gang
    replica_<r>_joined    replica r's task began                     (its join marker)
    inputs_staged         the last replica had its inputs staged     (the join markers)
    trainer_started       rank 0 started the runtime's entrypoint    (rank 0's outcome, or its stop)
    first_optimizer_step  the trainer logged its first step          (metrics.jsonl)
    cancelled             `rlaunch cancel` asked for the stop        (the cancel's record; status adds it)
    trainer_exited        the runtime's entrypoint exited            (rank 0's outcome, or its stop)
    finished              the host recorded the attempt's end

The host records the task phases when the attempt ends; `rlaunch status` reads them from the attempt
directory as they happen, so a run stopped before its host could record them (a cancel) shows them too.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from rlaunch import storage
from rlaunch.runs.layout import GANG_OUTCOME, GANG_STOPPED, JOINED, METRICS, attempt_dir, run_record
from rlaunch.statefiles import CorruptStateError
from rlaunch.waiting import WaitTimeout, wait_until

FINAL_STATES = ("succeeded", "failed", "cancelled", "prepared")
LOCK_TIMEOUT_SECONDS = 60.0
STALE_LOCK_SECONDS = 30.0  # a lock file this old on an object store belongs to a dead writer

Change = Callable[[dict[str, Any]], dict[str, Any]]  # an attempt's entry -> the fields to merge into it

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
    "cancelled",  # before the exits it causes; what never happened before it is absent
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
    first = _first_metrics_line(storage.join(directory, METRICS))
    return {**marker_phases(directory), **first_step_phase(first.get("time"))}


def marker_phases(directory: str) -> dict[str, str]:
    """The phases the gang's join markers and rank 0's outcome in the attempt `directory` say."""
    phases: dict[str, str] = {}
    joined = storage.join(directory, JOINED)
    staged = []
    for name in storage.list_names(joined):
        match = _REPLICA_MARKER.match(name)
        marker = _tolerant_json(storage.join(joined, name)) if match else None
        if not match or not isinstance(marker, dict):
            continue
        if started := _moment(marker.get("started_at")):
            phases[f"replica_{match.group(1)}_joined"] = started
        if staged_at := _moment(marker.get("time")):
            staged.append(staged_at)
    if staged:
        phases["inputs_staged"] = max(staged)
    for ended in (GANG_STOPPED, GANG_OUTCOME):  # a trainer stopped from outside leaves no outcome, only its times
        outcome = _tolerant_json(storage.join(directory, ended)) or {}
        if started := _moment(outcome.get("trainer_started_at")):
            phases["trainer_started"] = started
        if exited := _moment(outcome.get("time")):
            phases["trainer_exited"] = exited
    return phases


def _moment(value: Any) -> str | None:
    """A marker's time as the phases hold it (ISO-8601); epoch seconds are converted, anything else is absent."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _iso(float(value))
    return value if isinstance(value, str) and value else None


def first_step_phase(logged: Any) -> dict[str, str]:
    """`first_optimizer_step` at the time the first metrics line carries (epoch seconds), if it has one."""
    return {"first_optimizer_step": _iso(float(logged))} if isinstance(logged, (int, float)) else {}


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


def _tolerant_json(url: str) -> Any | None:
    """A marker for the phase table: a damaged one only leaves its phase out."""
    try:
        return storage.read_json(url)
    except CorruptStateError:
        return None


def update_attempt(output_path: str, run_id: str, attempt_id: str, fields: dict[str, Any]) -> None:
    """Merge `fields` into the attempt's entry, appending it when new (`phases` merge key by key)."""
    _update(output_path, run_id, attempt_id, lambda _: fields, only_open=False)


def amend_attempt(output_path: str, run_id: str, attempt_id: str, change: Change) -> None:
    """Merge the fields `change` makes of the attempt's entry as it stands ({} when new), read and
    written under the record's lock: a decision over the entry (a cancel leaves an attempt that
    succeeded meanwhile succeeded) sees every write before it and is overwritten by none after."""
    _update(output_path, run_id, attempt_id, change, only_open=False)


def close_attempt(output_path: str, attempt_id: str, fields: dict[str, Any]) -> bool:
    """Merge `fields` into the attempt only while it is still open (not in a final state).

    An observer's finalisation never overrides the host's own verdict; False when it was final.
    """
    return _update(output_path, None, attempt_id, lambda _: fields, only_open=True)


def add_entry(output_path: str, run_id: str, key: str, entry: dict[str, Any]) -> None:
    """Keep `entry` with the run, beside its attempts, in the list `key`: a `--skip-smoke-gate`
    override (`smoke_gate_overrides`: reason, who, when, what the gate found), a coordinator's replay
    refused before it built anything (`replay_refusals`: both fingerprints of each step that differed)."""
    from rlaunch.secrets import scrub_tree

    url = run_record(output_path)
    with record_lock(url):
        record = _read_for_update(url, run_id)
        record.setdefault(key, []).append(entry)
        storage.write_json_atomic(url, scrub_tree(record))


def keep_field(output_path: str, run_id: str, key: str, value: Any) -> None:
    """Set the run's top-level `key` to `value` (what holds for every attempt: the sweep it belongs to)."""
    from rlaunch.secrets import scrub_tree

    url = run_record(output_path)
    with record_lock(url):
        record = _read_for_update(url, run_id)
        record[key] = value
        storage.write_json_atomic(url, scrub_tree(record))


def read(output_path: str) -> dict[str, Any] | None:
    """The run record (None before the first attempt); CorruptStateError when it is damaged."""
    record = storage.read_json(run_record(output_path))
    if record is not None:
        _check_shape(record, run_record(output_path))
    return record


def _update(output_path: str, run_id: str | None, attempt_id: str, change: Change, only_open: bool) -> bool:
    from rlaunch.secrets import scrub_tree

    url = run_record(output_path)
    with record_lock(url):
        record = _read_for_update(url, run_id)
        attempts = record["attempts"]
        for entry in attempts:
            if entry.get("attempt_id") == attempt_id:
                if only_open and entry.get("state") in FINAL_STATES:
                    return False
                fields = change(dict(entry))
                phases = {**(entry.get("phases") or {}), **(fields.get("phases") or {})}
                entry.update(fields)
                if phases:
                    entry["phases"] = phases
                break
        else:
            if only_open:
                return False
            attempts.append({"attempt_id": attempt_id, **change({})})
        storage.write_json_atomic(url, scrub_tree(record))
    return True


def _check_shape(record: Any, url: str) -> None:
    if not isinstance(record, dict) or not isinstance(record.get("attempts"), list):
        raise CorruptStateError(url, "not a run record: no list of attempts")
    if not all(isinstance(a, dict) for a in record["attempts"]):
        raise CorruptStateError(url, "not a run record: an attempt entry is not an object")


def _read_for_update(url: str, run_id: str | None) -> dict[str, Any]:
    try:
        record: dict[str, Any] | None = storage.read_json(url)
        if record is not None:
            _check_shape(record, url)
    except CorruptStateError as exc:
        aside = f"{url}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}"
        storage.rename(url, aside)
        sys.stderr.write(f"warning: {exc.problem} in {url}; kept it as {aside} and started a new run record\n")
        return {"run_id": run_id, "attempts": [], "replaced_damaged_record": aside}
    if record is None:
        return {"run_id": run_id, "attempts": []}
    return record


@contextlib.contextmanager
def record_lock(url: str) -> Iterator[None]:
    """Exclusive access to the record at `url` for one read-modify-write."""
    if storage.is_local(url):
        from filelock import FileLock  # imported on use: a dry run never locks a record

        path = storage.local_path(url)
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        # An OS file lock: released by the kernel even when the holder is killed.
        with FileLock(os.path.join(directory, f".{os.path.basename(path)}.lock")):
            yield
        return
    lock = f"{url}.lock"  # an object store has no file locks: an exclusive create, taken over when stale

    def taken() -> bool:
        if storage.create_exclusive(lock, storage.dumps({"at": time.time(), "pid": os.getpid()})):
            return True
        try:
            holder = storage.read_json(lock) or {}
        except (CorruptStateError, OSError):
            holder = {}
        if time.time() - float(holder.get("at", time.time())) > STALE_LOCK_SECONDS:
            storage.remove(lock)
        return False

    try:
        wait_until(taken, LOCK_TIMEOUT_SECONDS, f"the run record lock {lock}", 0.1)
    except WaitTimeout:
        raise TimeoutError(
            f"{lock} has been held for over {LOCK_TIMEOUT_SECONDS:g}s; remove it if no launch runs"
        ) from None
    try:
        yield
    finally:
        storage.remove(lock)
