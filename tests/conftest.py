"""Fixtures shared across test packages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rlaunch import storage
from tests.launching import Launcher

# Developer settings a test must not inherit: where runs go, how jobs are reached, credentials.
UNSET = (
    "RLAUNCH_PREFIX",
    "RLAUNCH_TEMP_PREFIX",
    "RLAUNCH_REGION",
    "RLAUNCH_JOB_ID",
    "RLAUNCH_BACKEND",
    "RAY_ADDRESS",
    "WANDB_API_KEY",
)


@pytest.fixture
def prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh local storage prefix exported as RLAUNCH_PREFIX, run from a working directory of its
    own; none of the developer's settings (`UNSET`) leak in."""
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "cwd"
    work.mkdir(exist_ok=True)
    monkeypatch.chdir(work)
    root = tmp_path / "prefix"
    monkeypatch.setenv(storage.PREFIX_ENV, str(root))
    return str(root)


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    runner = Launcher(tmp_path / "prefix", {})
    yield runner
    jobs_root = runner.prefix / ".jobs"
    if jobs_root.exists():
        backend = runner.backend()
        for job in backend.list_jobs():
            if not job.state.terminal:
                backend.cancel(job.job_id, reason="test teardown")
