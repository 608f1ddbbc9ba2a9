"""Fixtures shared across test packages."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.launching import Launcher


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
