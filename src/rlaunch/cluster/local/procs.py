"""Process liveness and process-group shutdown.

A replica is the leader of its own process group, so stopping it means signalling the group:
that also reaches anything it spawned. Liveness reads /proc where it exists, because a zombie
(dead, not yet reaped by whoever inherited it) still answers `kill(pid, 0)`, and a pid can be
reused: a supervisor is identified by pid *and* start time.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterable

_PROC = "/proc"


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name, or None when there is no such entry."""
    try:
        with open(f"{_PROC}/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rpartition(")")[2].split()


def process_identity(pid: int) -> str | None:
    """The process's start time (clock ticks since boot) where /proc exists; None elsewhere."""
    fields = _stat_fields(pid) if os.path.isdir(_PROC) else None
    return fields[19] if fields else None


def process_alive(pid: int, identity: str | None = None) -> bool:
    """True while `pid` runs and (when `identity` is given and checkable) is still the same process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir(_PROC):
        return True
    fields = _stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return identity is None or fields[19] == identity


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process is in group `pgid`."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir(_PROC):
        return True
    for entry in os.listdir(_PROC):
        if entry.isdigit():
            fields = _stat_fields(int(entry))
            if fields and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                return True
    return False


def signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def stop_groups(pgids: Iterable[int], grace: float, tick: Callable[[], None] = lambda: None) -> None:
    """SIGTERM every group, SIGKILL what is left after `grace` seconds, return once all are gone.

    `tick` runs while waiting: the supervisor uses it to reap its children and keep draining
    their output, so a replica that logs on its way out is not blocked on a full pipe.
    """
    live = [g for g in pgids if group_alive(g)]
    for pgid in live:
        signal_group(pgid, signal.SIGTERM)
    for sig_deadline, next_signal in ((grace, signal.SIGKILL), (5.0, None)):
        deadline = time.monotonic() + sig_deadline
        while live and time.monotonic() < deadline:
            tick()
            time.sleep(0.02)
            live = [g for g in live if group_alive(g)]
        if next_signal is not None:
            for pgid in live:
                signal_group(pgid, next_signal)
    tick()
