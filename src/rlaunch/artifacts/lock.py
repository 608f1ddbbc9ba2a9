"""A per-output lock with a heartbeat, so two runners never build the same output at once.

The lock is a small file beside the output, created exclusively. Its holder rewrites it every
few seconds; a lock whose heartbeat is older than the stale limit (or whose holder process on
this host is gone) is taken over.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
import uuid
from typing import Any

from rlaunch import storage
from rlaunch.processes import process_alive

LOCK_FILE = ".lock.json"
HEARTBEAT_ENV = "RLAUNCH_LOCK_HEARTBEAT_SECONDS"
STALE_ENV = "RLAUNCH_LOCK_STALE_SECONDS"


class StepLock:
    def __init__(self, output_path: str, *, heartbeat_seconds: float | None = None, stale_seconds: float | None = None):
        self.url = storage.join(output_path, LOCK_FILE)
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.stale_seconds = stale_seconds or float(os.environ.get(STALE_ENV, "60"))
        # Beat several times per stale period, or a live holder on another host looks dead.
        default_beat = min(5.0, self.stale_seconds / 4)
        self.heartbeat_seconds = heartbeat_seconds or float(os.environ.get(HEARTBEAT_ENV, default_beat))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _payload(self) -> bytes:
        return storage.dumps(
            {"owner": self.owner, "host": socket.gethostname(), "pid": os.getpid(), "heartbeat_at": time.time()}
        )

    def holder(self) -> dict[str, Any] | None:
        try:
            return storage.read_json(self.url)
        except ValueError:  # a lock being rewritten by a store without atomic puts
            return None

    def is_stale(self, holder: dict[str, Any]) -> bool:
        if time.time() - float(holder.get("heartbeat_at", 0)) > self.stale_seconds:
            return True
        if holder.get("host") == socket.gethostname():
            return not process_alive(int(holder.get("pid", -1)))
        return False

    def try_acquire(self) -> bool:
        if storage.create_exclusive(self.url, self._payload()):
            self._start_heartbeat()
            return True
        holder = self.holder()
        if holder is None or not self.is_stale(holder):
            return False
        moved = f"{self.url}.stale-{uuid.uuid4().hex[:8]}"
        if storage.rename(self.url, moved):
            taken = storage.read_bytes(moved)
            try:
                still_stale = json.loads(taken) == holder
            except ValueError:
                still_stale = False
            if not still_stale:
                # Between reading the stale holder and moving it, another runner took the lock over
                # (or the holder beat again): what was moved is a live lock, so put it back.
                storage.create_exclusive(self.url, taken)
                storage.remove(moved)
                return False
            storage.remove(moved)
        if storage.create_exclusive(self.url, self._payload()):
            self._start_heartbeat()
            return True
        return False

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.heartbeat_seconds + 1)
        holder = self.holder()
        if holder is not None and holder.get("owner") == self.owner:
            storage.remove(self.url)

    def _start_heartbeat(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, name=f"lock-heartbeat {self.url}", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_seconds):
            try:
                if not self._beat_once():
                    return  # taken over; the new holder owns the output now
            except OSError as exc:  # a full or failing disk: said in one line, tried again at the next beat
                said = storage.disk_full_message(exc) if storage.is_disk_full(exc) else f"{exc}"
                sys.stderr.write(f"warning: the lock heartbeat of {self.url} could not beat: {said}\n")

    def _beat_once(self) -> bool:
        """Rewrite the lock's heartbeat; False when another runner holds it now."""
        holder = self.holder()
        if holder is None:
            # Moved away for a moment by a runner checking a takeover; re-assert exclusively
            # (if that runner already created its own lock, this fails and it owns the output).
            if storage.create_exclusive(self.url, self._payload()):
                return True
            holder = self.holder()
        if holder is None or holder.get("owner") != self.owner:
            return False
        storage.write_bytes_atomic(self.url, self._payload())
        return True
