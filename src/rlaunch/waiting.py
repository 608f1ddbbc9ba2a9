"""One way to wait for something another process does: `wait_until(probe, timeout, what, interval)`.

Every wait in rlaunch (a job to end, a rendezvous record to appear, a marker file, a lock) is a
probe called until it answers, with a pause between looks; a probe ends the wait early by raising
(a stop signal, a failure it sees). A wait that runs out raises `WaitTimeout` naming what it
waited for and for how long, which a caller turns into its own error when it knows the fix.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    """`what` did not happen within `timeout` seconds."""

    def __init__(self, what: str, timeout: float) -> None:
        super().__init__(f"timed out after {timeout:g}s waiting for {what}")
        self.what = what
        self.timeout = timeout


def wait_until(
    probe: Callable[[], T | None],
    timeout: float | None,
    what: str,
    interval: float = 0.05,
    *,
    max_interval: float | None = None,
) -> T:
    """`probe()`'s first truthy answer, looking again every `interval` seconds (growing by half up to
    `max_interval` when given); `WaitTimeout` after `timeout` seconds (None: no limit).

    The probe runs once more at the deadline, so a wait never times out on a state it did not look
    at, and no pause runs past the deadline."""
    deadline = None if timeout is None else time.monotonic() + timeout
    pause = interval
    while True:
        answer = probe()
        if answer:
            return answer
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(what, timeout or 0.0)
            time.sleep(min(pause, left))
        else:
            time.sleep(pause)
        if max_interval is not None:
            pause = min(pause * 1.5, max_interval)
