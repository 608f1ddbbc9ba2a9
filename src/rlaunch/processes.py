"""This process and others: who is acting, whether a pid is still the process it was, and how a
follower stops on SIGINT or SIGTERM (`interruptible`).

Liveness reads /proc where it exists, because a zombie (dead, not yet reaped) still answers
`kill(pid, 0)`, and a pid can be reused: a long-lived process is identified by pid *and* start
time.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import signal
import socket
from collections.abc import Callable, Iterator
from typing import Any

PROC_ROOT = "/proc"


def stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name, or None when there is no such entry."""
    try:
        with open(f"{PROC_ROOT}/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text.rpartition(")")[2].split()


def process_identity(pid: int) -> str | None:
    """The process's start time (clock ticks since boot) where /proc exists; None elsewhere."""
    fields = stat_fields(pid) if os.path.isdir(PROC_ROOT) else None
    return fields[19] if fields else None


def probe(send: Callable[[int, int], None], target: int) -> bool | None:
    """Signal 0 to `target` through `send` (`os.kill` or `os.killpg`): False when nothing is there,
    True when something is and /proc cannot say more (not ours to signal, or no /proc), None when
    /proc must decide (a zombie still answers signal 0)."""
    try:
        send(target, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return None if os.path.isdir(PROC_ROOT) else True


def process_alive(pid: int, identity: str | None = None) -> bool:
    """True while `pid` runs and (when `identity` is given and checkable) is still the same process."""
    if pid <= 0:
        return False  # kill(0 or -n, 0) would ask about a process group, not a process
    known = probe(os.kill, pid)
    if known is not None:
        return known
    fields = stat_fields(pid)
    if fields is None or fields[0] in ("Z", "X"):
        return False
    return identity is None or fields[19] == identity


def actor() -> dict[str, Any]:
    """Who is acting (submitting, cancelling): recorded so a stopped job says by whom."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return {"user": user, "host": socket.gethostname(), "pid": os.getpid()}


class Terminated(KeyboardInterrupt):
    """SIGTERM to a command that follows or watches: the same clean stop as Ctrl-C, with its own exit."""


def interrupt_exit(interrupt: KeyboardInterrupt) -> int:
    """The shell's exit status for the signal that stopped us: 143 for SIGTERM, 130 for Ctrl-C."""
    return 128 + (signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Inside the block SIGTERM raises `Terminated` where Ctrl-C raises KeyboardInterrupt, so one
    handler stops a follower on either (the default SIGTERM would end the process without a word)."""

    def terminated(signum: int, frame: object) -> None:
        raise Terminated()

    # Ctrl-C too, even where this process was started with SIGINT ignored (a background job of a
    # script, a worker that ignores it): Python then installs no KeyboardInterrupt of its own.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    previous = signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.signal(signal.SIGINT, previous_int)
