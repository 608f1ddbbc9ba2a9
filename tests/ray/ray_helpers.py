"""Small helpers for the Ray backend tests (imported as a top-level module: tests/ray has no
__init__.py, so that no package named `ray` can shadow the real one)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TypeVar

from tests.support.polling import pid_alive, py, read_pids  # noqa: F401 - shared by the Ray tests
from tests.support.polling import wait_for as _wait_for

T = TypeVar("T")


def wait_for(probe: Callable[[], T | None], timeout: float = 60.0, what: str = "condition") -> T:
    """Ray round trips are slower than local processes: a longer default limit, a calmer poll."""
    return _wait_for(probe, timeout=timeout, what=what, interval=0.1)


def ray_job_record(gcs: str, job_id: str) -> dict[str, object]:
    """What Ray itself stored for a job (entrypoint resources are not in the Jobs API's answer)."""
    from ray._raylet import GcsClient

    raw = GcsClient(address=gcs).internal_kv_get(
        f"_ray_internal_job_info_{job_id}".encode(), namespace=b"job", timeout=10
    )
    assert raw is not None, f"Ray has no job info for {job_id}"
    record: dict[str, object] = json.loads(raw)
    return record
