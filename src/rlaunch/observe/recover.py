"""What a run's other durable state still says when its run record is damaged.

The run record is the attempt history, but not the only trace a run leaves: the terminal manifest
(state, step, export, the resolved document), the attempt manifests the host writes when an
attempt ends (its jobs, state and failure), and the launch documents handed to the host (which
say where the attempts and checkpoints live, and the sweep a variant belongs to). `rlaunch status`
and `rlaunch runs` show the damage and, beside it, the attempt rebuilt from these. Read only: the
damaged record is left exactly as it is (the next `--run` keeps it aside by itself).
"""

from __future__ import annotations

from typing import Any

from rlaunch import storage
from rlaunch.artifacts.records import RECORD_FILE
from rlaunch.dotted import get_path
from rlaunch.launch_config import schema
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.observe.run_files import read_document, read_json
from rlaunch.runs.layout import (
    HANDED_DOCUMENT,
    attempt_dir,
    attempt_manifest,
    temporary_base,
    terminal_manifest,
)

_FROM_RESULT = (
    "attempt_id", "state", "coordinator_job_id", "child_job_id", "backend", "runtime_profile", "runtime_digest",
    "failure", "finished_at", "resolved_config_uri",
)  # fmt: skip


def _documents(
    output_path: str, artifact: str | None, prefix: str | None, terminal: dict[str, Any]
) -> list[SkyRLLaunchConfig]:
    """Launch documents of the run, most telling first: the terminal manifest's, the artifact
    record's, then those handed over beside each attempt under the temporary prefix."""
    found = []
    record = read_json(storage.join(output_path, RECORD_FILE)) or {}
    for data in (terminal.get("config"), get_path(record, "config.launch_document", None)):
        doc = schema.from_dict_tolerant(data) if data else None
        if doc is not None:
            found.append(doc)
    name, _, version = (artifact or "").partition("@")
    if prefix and name and version:
        base = temporary_base(prefix)
        for ttl in storage.list_names(base):
            attempts = storage.join(base, ttl, name, version, "attempts")
            for entry in storage.list_names(attempts) if ttl.startswith("ttl=") else []:
                doc = read_document(storage.join(attempts, entry, HANDED_DOCUMENT))
                if doc is not None:
                    found.append(doc)
    return found


def _entry(result: dict[str, Any], artifact: str | None, doc: SkyRLLaunchConfig | None) -> dict[str, Any]:
    """An attempt entry from a manifest's `result` (the host's LaunchResult) and the attempt's document."""
    entry: dict[str, Any] = {"state": "unknown", "artifact": artifact}  # no manifest: its jobs say the rest
    if doc is not None:
        entry.update(placement=dict(doc.cluster.placement), backend=doc.cluster.backend)
    entry.update({k: result[k] for k in _FROM_RESULT if result.get(k) is not None})
    entry["submitted_at"] = result.get("started_at")
    return entry


def recovered_record(output_path: str, artifact: str | None, prefix: str | None) -> dict[str, Any] | None:
    """A run record rebuilt from the run's other durable state (None when nothing else names an
    attempt): one entry per attempt the terminal manifest, an attempt manifest or a handed-over
    document names, oldest first, the terminal manifest's attempt last."""
    terminal = read_json(terminal_manifest(output_path)) or {}
    documents = _documents(output_path, artifact, prefix, terminal)
    attempts: dict[str, dict[str, Any]] = {}
    final = terminal.get("result") or {}
    if final.get("attempt_id"):
        attempts[final["attempt_id"]] = _entry(final, artifact, documents[0] if documents else None)
    for doc in documents:
        root = doc.artifacts.attempts_root
        for name in storage.list_names(root):
            attempt_id = name.removesuffix(".json")
            if attempt_id in attempts or not schema.ATTEMPT_ID.fullmatch(attempt_id):
                continue
            result = (read_json(attempt_manifest(root, attempt_id)) or {}).get("result") or {}
            attempts[attempt_id] = {"attempt_id": attempt_id, **_entry(result, artifact, doc)}
            handed = storage.join(attempt_dir(root, attempt_id), HANDED_DOCUMENT)
            if storage.exists(handed):
                attempts[attempt_id]["launch_document_uri"] = handed
    if not attempts:
        return None
    ordered = sorted(
        attempts.values(), key=lambda a: (a["attempt_id"] == final.get("attempt_id"), a["submitted_at"] or "")
    )
    run_id = documents[0].run.id if documents else final.get("run_id")
    rebuilt: dict[str, Any] = {"run_id": run_id, "attempts": ordered, "recovered": True}
    sweep = next((doc.run.sweep for doc in documents if doc.run.sweep is not None), None)
    if sweep is not None:  # a variant stays listed, shown and cancelled with its sweep
        rebuilt["sweep"] = dict(sweep)
    return rebuilt
