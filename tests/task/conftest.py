"""Fixtures for the task-side unit tests: real artifact directories with their records under an
isolated storage prefix, and a staging root of their own. No launch, no backend."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlaunch.artifacts import records
from rlaunch.task import bootstrap
from tests.support.runtime_registry import isolated_runtime_registry


@pytest.fixture(autouse=True)
def _isolated(prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shared isolated prefix, a staging root of the test's own, and no kept staging."""
    monkeypatch.delenv(bootstrap.KEEP_ENV, raising=False)
    monkeypatch.setenv(bootstrap.STAGING_ENV, str(tmp_path / "staging"))
    return prefix


@pytest.fixture
def marker_runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registered `test-marker` runtime (a trainer in the host interpreter), unregistered after."""
    with isolated_runtime_registry():
        monkeypatch.setenv("RLAUNCH_RUNTIME_PLUGINS", "tests.plugins.marker_runtime")
        yield


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_artifact(
    root: Path,
    files: dict[str, bytes],
    *,
    name: str = "models/tiny",
    version: str = "2026.12.01",
    fingerprint: str = "f" * 64,
    checksums: dict[str, str] | None = None,
) -> tuple[str, str]:
    """An artifact directory holding `files` and its record (listing every file's sha256 unless
    `checksums` says otherwise); returns (uri, identity)."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    listed = {rel: sha256(data) for rel, data in files.items()} if checksums is None else checksums
    records.write_record(
        str(root), {"name": name, "version": version, "fingerprint": fingerprint, "result": {"files": listed}}
    )
    return str(root), f"{name}@{version}:{fingerprint}"
