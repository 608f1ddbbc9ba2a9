"""Helpers for tests that run real local jobs: inline Python replicas and process checks."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

from tests.polling import py, wait_for  # noqa: F401 - shared by the cluster tests

T = TypeVar("T")


def read_pids(path: Path) -> list[int]:
    """Pids a replica wrote (one per line) once it is ready."""
    text = path.read_text() if path.exists() else ""
    return [int(p) for p in text.split()] if text.endswith("\n") else []


def pid_alive(pid: int) -> bool:
    """Independent of the code under test: /proc says the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def all_gone(pids: list[int]) -> bool:
    return not any(pid_alive(p) for p in pids)


def job_file(root: Path, job_id: str, name: str) -> Any:
    return json.loads((root / job_id / name).read_text())


def env_with_root(root: Path) -> dict[str, str]:
    """The test's environment pointing a subprocess at the test's job root."""
    return {**os.environ, "RLAUNCH_LOCAL_ROOT": str(root)}
