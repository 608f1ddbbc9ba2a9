"""Helpers every test package shares: polling instead of fixed sleeps, argv for inline code, and
process checks independent of the code under test."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None], timeout: float = 15.0, what: str = "condition", interval: float = 0.05
) -> T:
    """Poll `probe` until it returns something truthy (no fixed sleeps in tests).

    A probe that costs more than `interval` (one that starts `rlaunch status` in a process, say) is
    paused for as long as it took, so polling holds at most half a core from the run it waits on."""
    deadline = time.monotonic() + timeout
    while True:
        started = time.monotonic()
        value = probe()
        if value:
            return value
        now = time.monotonic()
        if now > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(max(interval, now - started))


def run_python(
    args: list[str], cwd: Path | str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """This interpreter with `args` (`-m module ...` or `-c code`), its output captured as text."""
    return subprocess.run(
        [sys.executable, *args], check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def py(code: str) -> tuple[str, ...]:
    """argv running `code` with this interpreter (a replica needs no installed script)."""
    return (sys.executable, "-c", textwrap.dedent(code))


# Replica code (prepend it: `py(HANDSHAKE + code)`) for the two ranks of a gang to meet at
# RLAUNCH_RENDEZVOUS: `handshake(timeout)` in rank 0 listens there and returns what rank 1 sends
# ("hello from rank 1"); rank 1 connects, retrying until `timeout`, and returns None.
HANDSHAKE = """
def handshake(timeout):
    import os, socket, time
    host, port = os.environ["RLAUNCH_RENDEZVOUS"].rsplit(":", 1)
    if os.environ["RLAUNCH_REPLICA_RANK"] == "0":
        server = socket.create_server(("", int(port)))
        server.settimeout(timeout)
        connection, _ = server.accept()
        return connection.recv(64).decode()
    deadline = time.time() + timeout
    while True:
        try:
            connection = socket.create_connection((host, int(port)), timeout=1)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    connection.sendall(b"hello from rank 1")
"""


def read_pids(path: Path) -> list[int]:
    """Pids a replica wrote (one per line) once it is ready."""
    text = path.read_text() if path.exists() else ""
    return [int(p) for p in text.split()] if text.endswith("\n") else []


def pid_alive(pid: int) -> bool:
    """Independent of the code under test: /proc says the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone (or going: a read can race the exit)
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")
