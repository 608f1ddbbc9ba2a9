"""What is written beside every output: the record, the status, and the provenance.

`{output}/.artifact.json` holds name, version, fingerprint, type, deps, the materialised config,
the result value and provenance; `{output}/.status.json` holds running / succeeded / failed.
The record is written before the status turns `succeeded`, both atomically, so a reader never
sees a success without its record.
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from rlaunch import storage

RECORD_FILE = ".artifact.json"
STATUS_FILE = ".status.json"
RECORD_SCHEMA = 1

RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED = "failed"


def record_url(output_path: str) -> str:
    return storage.join(output_path, RECORD_FILE)


def status_url(output_path: str) -> str:
    return storage.join(output_path, STATUS_FILE)


def read_record(output_path: str) -> dict[str, Any] | None:
    return storage.read_json(record_url(output_path))


def read_status(output_path: str) -> dict[str, Any] | None:
    return storage.read_json(status_url(output_path))


def write_record(output_path: str, record: dict[str, Any]) -> None:
    from rlaunch.secrets import scrub_tree

    storage.write_json_atomic(record_url(output_path), scrub_tree(record))


def write_status(
    output_path: str,
    state: str,
    *,
    error: str | None = None,
    owner: str | None = None,
    identity: str | None = None,
    fingerprint: str | None = None,
) -> None:
    """The step's state; identity and fingerprint let readers name a run that has no record yet."""
    storage.write_json_atomic(
        status_url(output_path),
        {
            "state": state,
            "updated_at": storage.utc_now(),
            "error": error,
            "owner": owner,
            "identity": identity,
            "fingerprint": fingerprint,
        },
    )


def find_record(uri: str, depth: int = 6) -> dict[str, Any] | None:
    """The record at `uri` or the nearest one above it (e.g. an export inside an RL artifact)."""
    current = uri.rstrip("/")
    for _ in range(depth):
        record = read_record(current)
        if record is not None:
            return record
        parent = current.rsplit("/", 1)[0]
        if parent == current or not parent or parent.endswith(":/"):
            return None
        current = parent
    return None


def is_succeeded(output_path: str) -> bool:
    status = read_status(output_path)
    return bool(status and status.get("state") == SUCCEEDED and read_record(output_path) is not None)


@dataclass(frozen=True)
class Provenance:
    """Who built an output, when, from which commit and command line. Captured once per run."""

    user: str
    host: str
    time: str
    git_commit: str | None
    git_dirty: bool | None
    argv: tuple[str, ...]
    cwd: str

    @classmethod
    def capture(cls, argv: list[str] | None = None) -> Provenance:
        commit, dirty = _git_state()
        return cls(
            user=_user(),
            host=socket.gethostname(),
            time=storage.utc_now(),
            git_commit=commit,
            git_dirty=dirty,
            argv=tuple(redact_argv(list(sys.argv if argv is None else argv))),
            cwd=os.getcwd(),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "user": self.user,
            "host": self.host,
            "time": self.time,
            "git_commit": self.git_commit,
            "git_dirty": self.git_dirty,
            "argv": list(self.argv),
            "cwd": self.cwd,
        }


def redact_argv(argv: list[str]) -> list[str]:
    """Replace credentials in arguments: environment secret values and token-shaped values."""
    from rlaunch.secrets import Scrubber

    scrubber = Scrubber.from_env()
    return [scrubber.text(arg) for arg in argv]


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        return str(os.getuid())


def _git_state() -> tuple[str | None, bool | None]:
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                capture_output=True,
                text=True,
                timeout=5,
                check=True,
            ).stdout.strip()
        )
        return commit, dirty
    except (OSError, subprocess.SubprocessError):
        return None, None
