"""Every test gets its own job root; teardown stops whatever a test left running, and fails if it had to."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlaunch.cluster.gang.procs import group_alive
from rlaunch.cluster.local.backend import LocalBackend

from .helpers import pid_alive


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "jobs"
    monkeypatch.setenv("RLAUNCH_LOCAL_ROOT", str(root))
    return root


@pytest.fixture
def backend(root: Path) -> Iterator[LocalBackend]:
    backend = LocalBackend(root, cpus=4, kill_grace=1.0)
    yield backend
    _stop_everything(backend)


def _processes(root: Path) -> tuple[list[int], list[int]]:
    """(live supervisor pids, live replica process groups) recorded under `root`."""
    supervisors, groups = [], []
    for job_dir in root.iterdir() if root.is_dir() else []:
        supervisor = job_dir / "supervisor.json"
        if supervisor.exists() and pid_alive(json.loads(supervisor.read_text())["pid"]):
            supervisors.append(json.loads(supervisor.read_text())["pid"])
        state = job_dir / "state.json"
        if state.exists():
            groups += [
                r["pid"] for r in json.loads(state.read_text())["replicas"] if r["pid"] and group_alive(r["pid"])
            ]
    return supervisors, groups


def _stop_everything(backend: LocalBackend) -> None:
    for status in backend.list_jobs():
        if not status.state.terminal:
            backend.cancel(status.job_id, reason="test teardown")
    deadline = time.monotonic() + 10
    while any(_processes(backend.root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    supervisors, groups = _processes(backend.root)
    for pid in supervisors:
        os.kill(pid, signal.SIGKILL)
    for pgid in groups:
        os.killpg(pgid, signal.SIGKILL)
    assert not supervisors and not groups, f"left running after the test: supervisors {supervisors}, groups {groups}"
