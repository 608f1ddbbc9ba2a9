"""Helpers every test package shares: polling instead of fixed sleeps, and argv for inline code."""

from __future__ import annotations

import sys
import textwrap
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None], timeout: float = 15.0, what: str = "condition", interval: float = 0.05
) -> T:
    """Poll `probe` until it returns something truthy (no fixed sleeps in tests)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def py(code: str) -> tuple[str, ...]:
    """argv running `code` with this interpreter (a replica needs no installed script)."""
    return (sys.executable, "-c", textwrap.dedent(code))
