"""Small helpers for the Ray backend tests (imported as a top-level module: tests/ray has no
__init__.py, so that no package named `ray` can shadow the real one)."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def py(code: str) -> tuple[str, ...]:
    """argv running `code` with this interpreter (the test cluster runs on this machine)."""
    return (sys.executable, "-c", textwrap.dedent(code))


def wait_for(probe: Callable[[], T | None], timeout: float = 60.0, what: str = "condition") -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def read_pids(path: Path) -> list[int]:
    text = path.read_text() if path.exists() else ""
    return [int(p) for p in text.split()] if text.endswith("\n") else []


def ray_job_record(gcs: str, job_id: str) -> dict[str, object]:
    """What Ray itself stored for a job (entrypoint resources are not in the Jobs API's answer)."""
    from ray._raylet import GcsClient

    raw = GcsClient(address=gcs).internal_kv_get(f"_ray_internal_job_info_{job_id}".encode(), namespace=b"job", timeout=10)
    assert raw is not None, f"Ray has no job info for {job_id}"
    record: dict[str, object] = json.loads(raw)
    return record
