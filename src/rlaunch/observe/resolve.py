"""A run reference -> the RL artifact's output path and the attempt to show.

A reference is one of:

* `name@version`   the RL artifact under the prefix (`--prefix`, else `$RLAUNCH_PREFIX`)
* an artifact path a local path or URL of the RL artifact's output directory
* a job id         a coordinator or child job id, found in the run records under the prefix
                   (or, before a run record exists, through the job's labels)
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import Any

from rlaunch import storage
from rlaunch.artifacts.records import RECORD_FILE, STATUS_FILE
from rlaunch.errors import UserError
from rlaunch.observe.recover import recovered_record
from rlaunch.observe.run_files import read_json
from rlaunch.runs import run_record
from rlaunch.runs.layout import RUN_RECORD
from rlaunch.statefiles import CorruptStateError

_IDENTITY = re.compile(r"^(?P<name>[^@\s:]+)@(?P<version>[^@/\s]+)$")
_SCAN_DEPTH = 8  # directory levels below the prefix searched for run records
_MARKERS = (RUN_RECORD, RECORD_FILE, STATUS_FILE)


class RunNotFoundError(UserError, LookupError):
    """A reference that names no run (the CLI prints it as a one-line error)."""


@dataclass(frozen=True)
class RunRef:
    output_path: str
    prefix: str | None  # the storage prefix the artifact lives under, when it can be told
    artifact: str | None  # name@version, when known
    record: dict[str, Any] | None  # the run record (None before the RL step recorded an attempt)
    attempt_id: str | None = None  # the attempt to show; None: the latest
    job_id: str | None = None  # the job id the reference named, if any
    damage: str | None = None  # the run record is damaged (what and the fix); `record` is then rebuilt

    def attempt(self) -> dict[str, Any] | None:
        """The selected attempt's entry of the run record (the latest when none was chosen)."""
        attempts: list[dict[str, Any]] = (self.record or {}).get("attempts") or []
        if self.attempt_id is None:
            return attempts[-1] if attempts else None
        for entry in attempts:
            if entry.get("attempt_id") == self.attempt_id:
                return entry
        return None


def split_identity(reference: str) -> tuple[str, str] | None:
    match = _IDENTITY.match(reference)
    return (match["name"], match["version"]) if match else None


# Searching these for run records would walk the whole machine or pseudo-filesystems like /proc.
_SYSTEM_TREES = ("/proc", "/sys", "/dev", "/run")
_SYSTEM_DIRS = ("/", "/bin", "/boot", "/etc", "/home", "/lib", "/lib64", "/media", "/mnt", "/opt", "/root",
                "/sbin", "/srv", "/usr", "/var")  # fmt: skip


def default_prefix(prefix: str | None) -> str:
    """`--prefix`, else `$RLAUNCH_PREFIX`, else `./rlaunch-artifacts`; refused when it is unusable."""
    chosen = storage.checked_prefix(prefix, field="--prefix") if prefix else storage.default_prefix()
    where = "--prefix" if prefix else "RLAUNCH_PREFIX"
    fs, path = storage.filesystem(chosen)  # StorageError for an unknown or uninstalled scheme
    if storage.is_local(chosen):
        real = os.path.realpath(path)
        if real in _SYSTEM_DIRS or any(real == t or real.startswith(t + "/") for t in _SYSTEM_TREES):
            raise storage.StorageError(
                f"{where} {chosen}: a system directory ({real}) is not a storage prefix; "
                "give the directory your runs were written under (e.g. ./rlaunch-artifacts)"
            )
    return chosen


def _normalise(path: str) -> str:
    if "://" in path:
        return path.rstrip("/")
    return os.path.abspath(os.path.expanduser(path))


def _looks_like_path(reference: str) -> bool:
    return "://" in reference or reference.startswith(("/", ".", "~")) or os.path.exists(reference)


def prefix_of(output_path: str, artifact: str | None) -> str | None:
    """The prefix `output_path` = `{prefix}/{name}/{version}` lives under, when `artifact` says."""
    parts = split_identity(artifact or "")
    if parts is None:
        return None
    suffix = "/" + "/".join(parts)
    return output_path[: -len(suffix)] if output_path.endswith(suffix) else None


def _artifact_name(output_path: str, record: dict[str, Any] | None) -> str | None:
    for entry in reversed((record or {}).get("attempts") or []):
        if entry.get("artifact"):
            return str(entry["artifact"])
    status = read_json(storage.join(output_path, STATUS_FILE)) or {}
    return status.get("identity")


def at_path(
    output_path: str, *, prefix: str | None = None, attempt_id: str | None = None, job_id: str | None = None
) -> RunRef:
    output_path = _normalise(output_path)
    damage = None
    try:
        record = run_record.read(output_path)
    except CorruptStateError as exc:  # never read as "no attempt yet": shown, beside what else is known
        damage, record = str(exc), None
    if (
        damage is None
        and record is None
        and not any(storage.exists(storage.join(output_path, m)) for m in (RECORD_FILE, STATUS_FILE))
    ):
        raise RunNotFoundError(f"no RL run at {output_path}: it holds no {RUN_RECORD} and no artifact record")
    artifact = _artifact_name(output_path, record)
    prefix = prefix or prefix_of(output_path, artifact)
    if damage is not None:
        record = recovered_record(output_path, artifact, prefix)
    ref = RunRef(
        output_path=output_path,
        prefix=prefix,
        artifact=artifact,
        record=record,
        attempt_id=attempt_id,
        job_id=job_id,
        damage=damage,
    )
    if attempt_id is not None and ref.attempt() is None:
        known = [a.get("attempt_id") for a in (record or {}).get("attempts") or []]
        raise RunNotFoundError(
            f"{artifact or output_path} has no attempt {attempt_id!r}; its attempts: {known or 'none yet'}"
        )
    return ref


def run_records(prefix: str, damaged: list[CorruptStateError] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(output path, run record) of every run under `prefix` (dot-directories are skipped).

    A damaged run record is skipped and, when `damaged` is given, added to it for the caller to report.
    """
    fs, root = storage.filesystem(prefix)
    found: list[tuple[str, dict[str, Any]]] = []
    frontier = [(root.rstrip("/") or "/", 0)]
    while frontier:
        path, depth = frontier.pop()
        try:
            entries = fs.ls(path, detail=True)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        names = {os.path.basename(str(e["name"]).rstrip("/")): e for e in entries}
        if RUN_RECORD in names:
            url = _url_for(prefix, root, path)
            try:
                record = run_record.read(url)
            except CorruptStateError as exc:
                if damaged is not None:
                    damaged.append(exc)
                record = None
            if isinstance(record, dict):
                found.append((url, record))
        if any(m in names for m in _MARKERS) or depth >= _SCAN_DEPTH:
            continue  # an artifact's own directory: its exports and files hold no further runs
        for name, entry in names.items():
            if entry.get("type") == "directory" and not name.startswith("."):
                frontier.append((str(entry["name"]).rstrip("/"), depth + 1))
    return found


def _url_for(prefix: str, root: str, path: str) -> str:
    """Map a filesystem path found under `root` back to a URL in `prefix`'s form."""
    rel = path[len(root.rstrip("/")) :].strip("/")
    return storage.join(prefix, rel) if rel else prefix


def by_job_id(job_id: str, prefix: str, attempt_id: str | None = None) -> RunRef:
    for output_path, record in run_records(prefix):
        for entry in reversed(record.get("attempts") or []):
            if job_id in (entry.get("coordinator_job_id"), entry.get("child_job_id")):
                return at_path(
                    output_path, prefix=prefix, attempt_id=attempt_id or entry.get("attempt_id"), job_id=job_id
                )
    ref = _by_job_labels(job_id, prefix)
    if ref is not None:
        return ref
    raise RunNotFoundError(
        f"{job_id!r} is not an RL artifact (name@version), an artifact path, or a job id recorded by a run under {prefix}"
    )


def _by_job_labels(job_id: str, prefix: str) -> RunRef | None:
    """A job whose run has no record yet: a coordinator still building the RL step's inputs."""
    from rlaunch.observe.run_jobs import find_job

    found = find_job(job_id, prefix)
    if found is None:
        return None
    _, status = found
    labels = dict(status.labels)
    parts = split_identity(labels.get("rlaunch.artifact", ""))
    if parts is None:
        return None
    output_path = storage.join(prefix, *parts)
    record = run_record.read(output_path)
    return RunRef(
        output_path=output_path, prefix=prefix, artifact=labels["rlaunch.artifact"], record=record, job_id=job_id
    )


def pending_coordinator(identity: str, output_path: str, prefix: str) -> RunRef | None:
    """A run submitted moments ago: its coordinator runs, or waits in a queue (labelled with the
    artifact), but wrote nothing yet."""
    from rlaunch.observe.run_jobs import unrecorded_backends

    try:
        candidates = unrecorded_backends(prefix)
    except (ValueError, OSError):
        return None
    for backend in candidates:
        try:
            jobs = backend.list_jobs()
        except (OSError, ValueError):
            continue
        mine = [
            j for j in jobs
            if j.labels.get("rlaunch.kind") == "coordinator" and j.labels.get("rlaunch.artifact") == identity and not j.state.terminal
        ]  # fmt: skip
        if mine:
            return RunRef(
                output_path=output_path, prefix=prefix, artifact=identity, record=None, job_id=mine[-1].job_id
            )
    return None


def resolve(reference: str, prefix: str | None = None, attempt_id: str | None = None) -> RunRef:
    """The run `reference` names; RunNotFoundError saying why when it names none."""
    reference = reference.strip()
    if not reference:
        raise RunNotFoundError("empty run reference; give name@version, an artifact path, or a job id")
    parts = None if reference.startswith(("/", ".", "~")) or "://" in reference else split_identity(reference)
    if parts is not None:
        base = default_prefix(prefix)
        output_path = storage.join(base, *parts)
        if not any(storage.exists(storage.join(output_path, m)) for m in _MARKERS):
            pending = pending_coordinator(reference, output_path, base)
            if pending is None or attempt_id is not None:
                raise RunNotFoundError(f"no RL run {reference} under {base} (set --prefix or RLAUNCH_PREFIX)")
            return pending
        ref = at_path(output_path, prefix=base, attempt_id=attempt_id)
        if attempt_id is None and ref.job_id is None and ref.damage is None and not (ref.record or {}).get("attempts"):
            # a record written at submission (the smoke gate's override) before the coordinator started
            pending = pending_coordinator(reference, output_path, base)
            if pending is not None:
                return replace(ref, job_id=pending.job_id)
        return ref
    if _looks_like_path(reference):
        return at_path(reference, prefix=prefix, attempt_id=attempt_id)
    return by_job_id(reference, default_prefix(prefix), attempt_id)
