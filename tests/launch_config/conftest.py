"""Fixtures for the launch-document tests: an isolated storage prefix per test."""

from __future__ import annotations

import pytest

from rlaunch import storage


@pytest.fixture(autouse=True)
def prefix(tmp_path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("RLAUNCH_PREFIX", "RLAUNCH_TEMP_PREFIX", "RLAUNCH_REGION"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    root = tmp_path / "prefix"
    monkeypatch.setenv(storage.PREFIX_ENV, str(root))
    return str(root)
