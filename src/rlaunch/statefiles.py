"""The one parser of rlaunch's state files: records, markers and manifests.

rlaunch writes every state file atomically, so a file that does not parse was damaged outside
rlaunch (a full disk, a copy cut short, an edit). Such a file is never read as "missing": the
reader raises `CorruptStateError`, which names the file, what is wrong with it and what to do,
chosen by the file's role (a run record, a local job's state, a step status, a checkpoint marker).
Callers that list many things (`rlaunch jobs list`, `rlaunch runs`) report the damaged one and go on.
"""

from __future__ import annotations

import json
from typing import Any

from rlaunch.errors import UserError

_GENERIC_FIX = (
    "rlaunch writes it atomically, so it was changed outside rlaunch: restore it from a copy, or move it "
    "aside (mv FILE FILE.corrupt) and rerun"
)
# base name -> what to do about it when it is damaged
_FIXES = {
    "run_record.json": (
        "it is the run's attempt history: restore it from a copy, or move it aside (mv FILE FILE.corrupt); "
        "the next --run keeps a damaged record aside by itself and starts a new one"
    ),
    "job.json": (
        "the local job's record is damaged: once none of its processes runs any more, remove its directory "
        "DIR (rlaunch jobs list shows the other jobs)"
    ),
    "state.json": (
        "the local job's state is damaged: once none of its processes runs any more, remove its directory "
        "DIR (rlaunch jobs list shows the other jobs)"
    ),
    "supervisor.json": "the local job's supervisor record is damaged: remove the job's directory DIR once it has ended",
    ".status.json": (
        "the step's status is damaged: remove it and the .artifact.json beside it (DIR) so the next --run "
        "rebuilds the step, or restore them from a copy"
    ),
    ".artifact.json": (
        "the step's record is damaged: remove it and the .status.json beside it (DIR) so the next --run "
        "rebuilds the step, or restore them from a copy"
    ),
    "latest": (
        "a checkpoint marker holds one step number: write the step of the newest complete checkpoint "
        "(a global_step_N directory in DIR) into it, or remove it to start the run from its first step"
    ),
    "latest_ckpt_global_step.txt": (
        "a checkpoint marker holds one step number: write the step of the newest complete checkpoint "
        "(a global_step_N directory in DIR) into it, or remove it to start the run from its first step"
    ),
}


class CorruptStateError(UserError, ValueError):
    """A state file that exists but cannot be read; the message names the file and the fix."""

    def __init__(self, source: str, problem: str) -> None:
        self.source = source
        self.problem = problem
        super().__init__(f"{source} is damaged ({problem}); {fix_for(source)}")


def fix_for(source: str) -> str:
    """What to do about a damaged `source`, by the role its base name gives it."""
    base = source.rstrip("/").rsplit("/", 1)[-1]
    directory = source.rstrip("/").rsplit("/", 1)[0] if "/" in source else "."
    return _FIXES.get(base, _GENERIC_FIX).replace("FILE", source).replace("DIR", directory)


def parse_json(data: bytes, source: str) -> Any:
    """The JSON document in `data` (read from `source`); CorruptStateError when it is not one."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise CorruptStateError(source, f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except ValueError as exc:
        problem = "empty file" if not data.strip() else f"not valid JSON: {exc}"
        raise CorruptStateError(source, problem) from None


def require_object(value: Any, source: str) -> dict[str, Any] | None:
    """`value` read from `source`, which must hold one JSON object (every record rlaunch writes);
    None stays None (the file does not exist)."""
    if value is not None and not isinstance(value, dict):
        raise CorruptStateError(source, f"holds a JSON {type(value).__name__}, not an object")
    return value


def parse_step_marker(text: str | bytes, source: str) -> int:
    """A checkpoint marker's step number (a non-negative integer and nothing else)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptStateError(source, "not UTF-8 text") from None
    value = text.strip()
    if not value.isdigit() or not value.isascii():
        shown = value[:40] + ("…" if len(value) > 40 else "")
        raise CorruptStateError(source, f"holds {shown!r}, not a step number")
    return int(value)
