"""Helpers for tests that run real local jobs: inline Python replicas and process checks."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

from tests.support.polling import pid_alive, py, read_pids, wait_for  # noqa: F401 - shared by the cluster tests

T = TypeVar("T")


def all_gone(pids: list[int]) -> bool:
    return not any(pid_alive(p) for p in pids)


def job_file(root: Path, job_id: str, name: str) -> Any:
    return json.loads((root / job_id / name).read_text())


def env_with_root(root: Path) -> dict[str, str]:
    """The test's environment pointing a subprocess at the test's job root."""
    return {**os.environ, "RLAUNCH_LOCAL_ROOT": str(root)}
