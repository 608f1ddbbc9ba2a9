"""Process-group liveness and shutdown.

A replica is the leader of its own process group, so stopping it means signalling the group:
that also reaches anything it spawned. (Single-process liveness lives in `rlaunch.processes`.)
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterable

from rlaunch.processes import PROC_ROOT, probe, process_alive, process_identity, stat_fields
from rlaunch.waiting import WaitTimeout, wait_until

__all__ = ["group_alive", "process_alive", "process_identity", "stop_groups"]


def group_alive(pgid: int) -> bool:
    """True while any non-zombie process is in group `pgid`."""
    known = probe(os.killpg, pgid)
    if known is not None:
        return known
    for entry in os.listdir(PROC_ROOT):
        if entry.isdigit():
            fields = stat_fields(int(entry))
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

    def all_gone() -> bool:
        nonlocal live
        tick()
        live = [g for g in live if group_alive(g)]
        return not live

    for sig_deadline, next_signal in ((grace, signal.SIGKILL), (5.0, None)):
        with contextlib.suppress(WaitTimeout):
            wait_until(all_gone, sig_deadline, "the process groups to exit", 0.02)
        if next_signal is not None:
            for pgid in live:
                signal_group(pgid, next_signal)
    tick()
