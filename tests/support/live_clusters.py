"""What the real-cluster tiers (Ray, Iris, Slurm) share: a session cluster whose processes must all
be gone when it stops, a test environment holding only the cluster's address, and a backend whose
jobs the test must have finished."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest

from rlaunch.cluster.protocol import Backend

C = TypeVar("C")
B = TypeVar("B", bound=Backend)


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports that are free now. Every socket stays bound until all are
    chosen: ports picked one at a time can coincide (a cluster's components then clash at start-up)."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]


def free_port() -> int:
    """One loopback port that is free now."""
    return free_ports(1)[0]


def stopped_at_the_end(cluster: C, stop: Callable[[C], list[Any]], what: str) -> Iterator[C]:
    """Yield `cluster`; then stop it and fail if any of its processes outlived it."""
    try:
        yield cluster
    finally:
        left = stop(cluster)
        assert not left, f"processes of the test {what} outlived it (killed now): {left}"


def cluster_env(monkeypatch: pytest.MonkeyPatch, cleared: tuple[str, ...], **settings: str) -> None:
    """Drop every variable starting with one of `cleared` (the developer's settings), then set `settings`."""
    for name in [k for k in os.environ if k.startswith(cleared)]:
        monkeypatch.delenv(name)
    for name, value in settings.items():
        monkeypatch.setenv(name, value)


def jobs_finished_by_the_test(backend: B) -> Iterator[B]:
    """Yield `backend`; then cancel the jobs the test left unfinished, and fail the test for them."""
    before = {s.job_id for s in backend.list_jobs()}
    yield backend
    left = [s.job_id for s in backend.list_jobs() if s.job_id not in before and not s.state.terminal]
    for job_id in left:
        backend.cancel(job_id, reason="test teardown")
    assert not left, f"jobs left running after the test (cancelled now): {left}"
