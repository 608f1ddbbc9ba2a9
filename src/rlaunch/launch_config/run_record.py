"""The durable run record: one entry per attempt, under the RL artifact's path.

The experiment side writes what it knows before handing over (artifact identity, fingerprint,
argv, topology and role plan); the host adds job ids and the final state. Each write merges into
the attempt's entry and rewrites the small file atomically.
"""

from __future__ import annotations

from typing import Any

from rlaunch import storage
from rlaunch.launch_config.layout import run_record


def update_attempt(output_path: str, run_id: str, attempt_id: str, fields: dict[str, Any]) -> None:
    url = run_record(output_path)
    record = storage.read_json(url) or {"run_id": run_id, "attempts": []}
    attempts = record["attempts"]
    for entry in attempts:
        if entry.get("attempt_id") == attempt_id:
            entry.update(fields)
            break
    else:
        attempts.append({"attempt_id": attempt_id, **fields})
    storage.write_json_atomic(url, record)


def read(output_path: str) -> dict[str, Any] | None:
    return storage.read_json(run_record(output_path))
