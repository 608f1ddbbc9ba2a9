"""The per-output lock: exclusive, kept alive by a heartbeat, taken over when stale."""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from rlaunch import storage
from rlaunch.artifacts.lock import StepLock
from tests.support.faults import fill, small_tmpfs


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
        reasserted = lock.holder()["heartbeat_at"]
        assert _wait_until(lambda: lock.holder()["heartbeat_at"] > reasserted)  # and keeps beating
    finally:
        lock.release()
    assert lock.holder() is None


def test_the_owner_names_this_host_and_process_and_is_unique_per_lock(output):
    first, second = StepLock(output), StepLock(output)
    host, pid, tag = first.owner.rsplit(":", 2)
    assert (host, pid) == (socket.gethostname(), str(os.getpid()))
    assert len(tag) == 8 and int(tag, 16) >= 0
    assert first.owner != second.owner
    assert first.url == storage.join(output, ".lock.json")


def test_the_holder_record_says_who_holds_it_and_when_it_last_beat(output):
    lock = StepLock(output, heartbeat_seconds=30)
    before = time.time()
    assert lock.try_acquire()
    try:
        holder = lock.holder()
        assert set(holder) == {"owner", "host", "pid", "heartbeat_at"}
        assert (holder["owner"], holder["host"], holder["pid"]) == (lock.owner, socket.gethostname(), os.getpid())
        assert before <= holder["heartbeat_at"] <= time.time()
    finally:
        lock.release()


@pytest.mark.parametrize(
    ("stale_env", "beat_env", "stale", "beat"),
    [
        (None, None, 60.0, 5.0),  # the defaults: beat every 5 s, stale after a minute
        ("8", None, 8.0, 2.0),  # a short stale limit beats four times per period
        ("400", None, 400.0, 5.0),  # a long one still beats every 5 s
        ("8", "0.5", 8.0, 0.5),
    ],
)
def test_lock_timings_default_and_come_from_the_environment(tmp_path, monkeypatch, stale_env, beat_env, stale, beat):
    for name, value in (("RLAUNCH_LOCK_STALE_SECONDS", stale_env), ("RLAUNCH_LOCK_HEARTBEAT_SECONDS", beat_env)):
        if value is not None:
            monkeypatch.setenv(name, value)
    lock = StepLock(str(tmp_path))
    assert (lock.stale_seconds, lock.heartbeat_seconds) == (stale, beat)


def test_explicit_lock_timings_win_over_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("RLAUNCH_LOCK_STALE_SECONDS", "8")
    monkeypatch.setenv("RLAUNCH_LOCK_HEARTBEAT_SECONDS", "0.5")
    lock = StepLock(str(tmp_path), stale_seconds=30, heartbeat_seconds=3)
    assert (lock.stale_seconds, lock.heartbeat_seconds) == (30, 3)


@pytest.mark.parametrize(
    ("holder", "stale"),
    [
        ({"host": "another-host", "pid": 1, "heartbeat_at": "now"}, False),  # fresh, remote: trusted
        ({"host": "another-host", "pid": 1, "heartbeat_at": "old"}, True),  # heartbeat past the limit
        ({"host": "another-host", "pid": 1}, True),  # never beat
        ({"host": "this-host", "pid": "self", "heartbeat_at": "now"}, False),  # fresh, alive here
        ({"host": "this-host", "pid": "dead", "heartbeat_at": "now"}, True),  # fresh, but its process is gone
        ({"host": "this-host", "heartbeat_at": "now"}, True),  # no process to check
        ({"pid": "dead", "heartbeat_at": "now"}, False),  # no host: cannot check a process, trust the beat
    ],
)
def test_a_lock_is_stale_when_its_heartbeat_is_old_or_its_local_process_is_gone(tmp_path, holder, stale):
    lock = StepLock(str(tmp_path), stale_seconds=30)
    now = time.time()
    resolved = dict(holder)
    if resolved.get("host") == "this-host":
        resolved["host"] = socket.gethostname()
    if isinstance(resolved.get("pid"), str):
        resolved["pid"] = os.getpid() if resolved["pid"] == "self" else _dead_pid()
    if "heartbeat_at" in resolved:
        resolved["heartbeat_at"] = now if resolved["heartbeat_at"] == "now" else now - 31
    assert lock.is_stale(resolved) is stale


def test_an_unreadable_lock_is_neither_read_nor_taken_over(output):
    lock = StepLock(output, stale_seconds=1)
    storage.write_bytes_atomic(lock.url, b'{"owner": "half-writ')
    assert lock.holder() is None
    assert not lock.try_acquire()
    assert storage.read_bytes(lock.url) == b'{"owner": "half-writ'


def _leftovers(lock: StepLock) -> list[str]:
    parent = lock.url.rsplit("/", 1)[0]
    return sorted(n for n in storage.list_names(parent) if n != ".lock.json")


def test_taking_over_a_dead_lock_leaves_nothing_of_it_behind(output):
    lock = StepLock(output, stale_seconds=5, heartbeat_seconds=30)
    _plant(lock, host="another-host", heartbeat_at=time.time() - 30)
    assert lock.try_acquire()
    try:
        assert lock.holder()["owner"] == lock.owner
        assert _leftovers(lock) == []
    finally:
        lock.release()


def test_takeover_backs_off_when_the_moved_lock_is_unreadable(output, monkeypatch):
    """What was moved aside is not the stale holder it read (here: a half-written lock): put it back."""
    lock = StepLock(output, stale_seconds=5)
    stale = {"owner": "dead", "host": "another-host", "pid": 1, "heartbeat_at": time.time() - 60}
    storage.write_bytes_atomic(lock.url, b"{half")
    monkeypatch.setattr(lock, "holder", lambda: dict(stale))
    assert not lock.try_acquire()
    assert storage.read_bytes(lock.url) == b"{half"
    assert _leftovers(lock) == []


def test_release_stops_the_heartbeat_and_a_released_lock_can_be_taken_again(output):
    lock = StepLock(output, heartbeat_seconds=0.01)
    assert lock.try_acquire()
    [beat] = [t for t in threading.enumerate() if t.name == f"lock-heartbeat {lock.url}"]
    assert beat.daemon  # never keeps a finished runner alive
    lock.release()
    assert not beat.is_alive() and lock.holder() is None
    assert lock.try_acquire()  # the same lock object, again: it beats again
    try:
        [again] = [t for t in threading.enumerate() if t.name == f"lock-heartbeat {lock.url}"]
        assert again is not beat and again.is_alive()
        before = lock.holder()["heartbeat_at"]
        assert _wait_until(lambda: lock.holder()["heartbeat_at"] > before)
    finally:
        lock.release()
    assert lock.holder() is None


def test_releasing_a_lock_never_taken_leaves_the_holder_alone(output):
    lock = StepLock(output)
    planted = _plant(lock, owner="someone-else")
    lock.release()
    assert storage.read_json(lock.url) == planted


class _MissesOneRead(StepLock):
    """Its heartbeat once finds no lock although one is there: another runner had moved it aside
    to check a takeover and has put it back by the time this one tries to re-create it."""

    missed = False

    def holder(self):
        if not self.missed and self._thread is threading.current_thread():
            self.missed = True
            return None
        return super().holder()


def test_the_heartbeat_keeps_beating_when_its_lock_was_put_back(output):
    lock = _MissesOneRead(output, heartbeat_seconds=0.01)
    assert lock.try_acquire()
    try:
        assert _wait_until(lambda: lock.missed)
        after_miss = lock.holder()["heartbeat_at"]
        assert _wait_until(lambda: lock.holder()["heartbeat_at"] > after_miss)
        assert lock.holder()["owner"] == lock.owner
    finally:
        lock.release()


def test_takeover_loses_to_a_runner_that_created_its_lock_first(output, monkeypatch):
    """Between moving the stale lock aside and creating its own, a rival created one: it backs off."""
    lock, rival = StepLock(output, stale_seconds=5), StepLock(output, heartbeat_seconds=30)
    _plant(lock, host="another-host", heartbeat_at=time.time() - 60)
    remove = storage.remove

    def remove_then_rival_wins(url, *args, **kwargs):
        remove(url, *args, **kwargs)
        if ".stale-" in str(url):
            assert rival.try_acquire()

    monkeypatch.setattr(storage, "remove", remove_then_rival_wins)
    try:
        assert not lock.try_acquire()
        assert storage.read_json(lock.url)["owner"] == rival.owner
    finally:
        monkeypatch.setattr(storage, "remove", remove)
        rival.release()


def test_a_full_disk_under_the_heartbeat_is_said_in_one_line_and_the_heartbeat_goes_on(tmp_path, capfd):
    with small_tmpfs(tmp_path / "small", "64k") as small:
        lock = StepLock(str(small / "out"), heartbeat_seconds=0.05, stale_seconds=60)
        assert lock.try_acquire()
        try:
            filler = fill(small)
            assert _wait_until(lambda: "ENOSPC" in capfd.readouterr().err and True, timeout=5)
            filler.unlink()
            beat = lock.holder()["heartbeat_at"]
            assert _wait_until(lambda: (lock.holder() or {}).get("heartbeat_at", 0) > beat), "the heartbeat stopped"
        finally:
            lock.release()


def test_another_failure_under_the_heartbeat_is_said_as_it_is(output, capfd, monkeypatch):
    lock = StepLock(output, heartbeat_seconds=0.02, stale_seconds=60)
    failures = iter([OSError(errno.EIO, "Input/output error")])

    def beat_once() -> bool:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return False  # then taken over: the heartbeat ends

    monkeypatch.setattr(lock, "_beat_once", beat_once)
    assert lock.try_acquire()
    try:
        assert _wait_until(lambda: lock._thread is not None and not lock._thread.is_alive(), timeout=5)
    finally:
        lock.release()
    assert capfd.readouterr().err == (
        f"warning: the lock heartbeat of {lock.url} could not beat: [Errno 5] Input/output error\n"
    )


def test_one_beat_after_a_takeover_says_so_and_writes_nothing(output):
    lock = StepLock(output, heartbeat_seconds=30)
    assert lock.try_acquire()
    planted = _plant(lock, owner="new-owner")
    assert lock._beat_once() is False
    assert storage.read_json(lock.url) == planted
    lock.release()
