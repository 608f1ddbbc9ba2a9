"""The per-output lock: exclusive, kept alive by a heartbeat, taken over when stale."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from rlaunch import storage
from rlaunch.artifacts.lock import StepLock


@pytest.fixture
def output(any_prefix) -> str:
    return storage.join(any_prefix, "models/tiny", "2026.11.30")


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _plant(lock: StepLock, **fields) -> dict:
    payload = {"owner": "someone-else", "host": socket.gethostname(), "pid": 1, "heartbeat_at": time.time(), **fields}
    storage.write_bytes_atomic(lock.url, json.dumps(payload).encode())
    return payload


def _wait_until(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_only_one_holder_at_a_time(output):
    first, second = StepLock(output), StepLock(output)
    assert first.try_acquire()
    try:
        assert not second.try_acquire()
        holder = second.holder()
        assert holder["owner"] == first.owner and holder["host"] == socket.gethostname()
    finally:
        first.release()
    assert first.holder() is None
    assert second.try_acquire()
    second.release()


def test_the_heartbeat_refreshes_the_lock(output):
    lock = StepLock(output, heartbeat_seconds=0.05)
    assert lock.try_acquire()
    try:
        before = lock.holder()["heartbeat_at"]
        assert _wait_until(lambda: lock.holder()["heartbeat_at"] > before)
    finally:
        lock.release()


def test_a_live_holder_is_not_taken_over(output):
    lock = StepLock(output, stale_seconds=60)
    planted = _plant(lock, pid=os.getpid())
    assert not lock.try_acquire()
    assert lock.holder() == planted


def test_a_lock_whose_process_died_is_taken_over(output):
    lock = StepLock(output, stale_seconds=3600)
    _plant(lock, pid=_dead_pid())
    assert lock.try_acquire()
    try:
        assert lock.holder()["owner"] == lock.owner
    finally:
        lock.release()


def test_a_remote_lock_with_a_dead_heartbeat_is_taken_over(output):
    lock = StepLock(output, stale_seconds=5)
    _plant(lock, host="another-host", pid=123, heartbeat_at=time.time() - 30)
    assert lock.try_acquire()
    lock.release()


def test_a_remote_lock_with_a_fresh_heartbeat_is_respected(output):
    lock = StepLock(output, stale_seconds=5)
    planted = _plant(lock, host="another-host", pid=123, heartbeat_at=time.time())
    assert not lock.try_acquire()
    assert lock.holder() == planted


def test_stale_limit_comes_from_the_environment(output, monkeypatch):
    monkeypatch.setenv("RLAUNCH_LOCK_STALE_SECONDS", "2")
    lock = StepLock(output)
    assert lock.stale_seconds == 2
    assert lock.heartbeat_seconds <= 0.5  # beats several times per stale period
    _plant(lock, host="another-host", heartbeat_at=time.time() - 3)
    assert lock.try_acquire()
    lock.release()


def test_takeover_does_not_steal_a_lock_that_was_renewed_meanwhile(output, monkeypatch):
    """Two runners see the same stale lock; the first takes it over; the second must back off."""
    lock = StepLock(output, stale_seconds=5)
    stale = {"owner": "dead", "host": "another-host", "pid": 1, "heartbeat_at": time.time() - 60}
    live = _plant(lock, owner="winner", host="another-host", pid=2, heartbeat_at=time.time())
    # This runner read the stale holder just before the winner replaced it.
    monkeypatch.setattr(lock, "holder", lambda: dict(stale))
    assert not lock.try_acquire()
    assert storage.read_json(lock.url) == live
    parent = lock.url.rsplit("/", 1)[0]
    assert [n for n in storage.list_names(parent) if "stale" in n] == []


def test_release_leaves_a_lock_that_was_taken_over(output):
    lock = StepLock(output, heartbeat_seconds=30)
    assert lock.try_acquire()
    planted = _plant(lock, owner="new-owner")
    lock.release()
    assert storage.read_json(lock.url) == planted


def test_the_heartbeat_stops_once_taken_over(output):
    lock = StepLock(output, heartbeat_seconds=0.05)
    assert lock.try_acquire()
    planted = _plant(lock, owner="new-owner", heartbeat_at=12.0)
    time.sleep(0.3)
    assert storage.read_json(lock.url) == planted  # never overwritten by the old holder
    lock.release()


def test_the_heartbeat_reasserts_a_lock_moved_away_for_a_moment(output):
    lock = StepLock(output, heartbeat_seconds=0.05)
    assert lock.try_acquire()
    try:
        storage.remove(lock.url)
        assert _wait_until(lambda: (lock.holder() or {}).get("owner") == lock.owner)
    finally:
        lock.release()
    assert lock.holder() is None
