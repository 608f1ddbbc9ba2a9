"""Fixtures shared across test packages."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlaunch import storage
from tests.documents import rendered_document
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


def isolated_prefix(monkeypatch: pytest.MonkeyPatch, root: Path) -> str:
    """Clear the developer's settings (`UNSET`), run from `root/cwd` and export `root/prefix` as
    RLAUNCH_PREFIX; the prefix's path."""
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)
    work = root / "cwd"
    work.mkdir(exist_ok=True)
    monkeypatch.chdir(work)
    prefix = root / "prefix"
    monkeypatch.setenv(storage.PREFIX_ENV, str(prefix))
    return str(prefix)


@pytest.fixture
def prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh local storage prefix exported as RLAUNCH_PREFIX, run from a working directory of its
    own; none of the developer's settings (`UNSET`) leak in."""
    return isolated_prefix(monkeypatch, tmp_path)


@pytest.fixture
def document(prefix: str) -> dict[str, Any]:
    """The seed's 64-GPU launch document as plain data (8 nodes x 8 H100, policy 4 x 8, four DP8
    engines, seed 17), rendered for a run into `prefix`."""
    return rendered_document(prefix)


@pytest.fixture(scope="module")
def module_prefix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`prefix` shared by all tests of a module, for modules that build costly documents once."""
    monkeypatch = pytest.MonkeyPatch()
    yield isolated_prefix(monkeypatch, tmp_path_factory.mktemp("module"))
    monkeypatch.undo()


@pytest.fixture
def signal_handlers() -> Iterator[None]:
    """The host and a Ray-driver task install their own SIGTERM/SIGINT/SIGHUP handlers: put pytest's back."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


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
