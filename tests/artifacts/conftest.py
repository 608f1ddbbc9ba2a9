"""Fixtures for the artifact-graph tests: isolated storage prefixes (local and in-memory)."""

from __future__ import annotations

import uuid

import fsspec
import pytest

from rlaunch import storage

from .helpers import Recorder


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """No test sees the developer's prefix, region, lock timings or credentials."""
    for name in ("RLAUNCH_PREFIX", "RLAUNCH_REGION", "RLAUNCH_LOCK_STALE_SECONDS", "RLAUNCH_LOCK_HEARTBEAT_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)


@pytest.fixture
def memory_prefix(monkeypatch: pytest.MonkeyPatch):
    """A fresh fsspec memory:// prefix, removed afterwards."""
    root = f"memory://rlaunch-test-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv(storage.PREFIX_ENV, root)
    yield root
    fs = fsspec.filesystem("memory")
    path = root.split("://", 1)[1]
    if fs.exists(path):
        fs.rm(path, recursive=True)


@pytest.fixture(params=["local", "memory"])
def any_prefix(request) -> str:
    """Both a local folder and a memory:// prefix."""
    name = "prefix" if request.param == "local" else "memory_prefix"
    return request.getfixturevalue(name)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
