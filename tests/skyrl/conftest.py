"""Fixtures for the RL configuration tests: every test gets its own storage prefix."""

from __future__ import annotations

import pytest

from rlaunch import storage


@pytest.fixture(autouse=True)
def prefix(tmp_path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh local prefix exported as RLAUNCH_PREFIX; no developer settings leak in."""
    for name in ("RLAUNCH_PREFIX", "RLAUNCH_TEMP_PREFIX", "RLAUNCH_REGION", "RAY_ADDRESS", "WANDB_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    root = tmp_path / "prefix"
    monkeypatch.setenv(storage.PREFIX_ENV, str(root))
    return str(root)
