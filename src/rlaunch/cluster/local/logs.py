"""Reading a job's combined log (`[rank N] line`), optionally one rank, the tail, or following it.

The supervisor writes every replica's output into one file in arrival order, so interleaving is
the order lines were produced and one rank's view is a prefix filter. Following checks whether
the job is finished *before* reading: a job is marked finished only after its output is written,
so the read that follows that check drains everything.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterator
from pathlib import Path

_MAX_POLL = 0.5


def _select(rank: int | None) -> Callable[[str], str | None]:
    if rank is None:
        return lambda line: line
    prefix = f"[rank {rank}] "
    return lambda line: line[len(prefix) :] if line.startswith(prefix) else None


class _Reader:
    """Incremental reader of complete lines from a file that another process appends to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""

    def read_lines(self, final: bool) -> list[str]:
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except FileNotFoundError:
            data = b""
        self.offset += len(data)
        chunks = (self.partial + data).split(b"\n")
        self.partial = chunks.pop()
        if final and self.partial:
            chunks.append(self.partial)
            self.partial = b""
        return [c.decode("utf-8", errors="replace") for c in chunks]


def read_log(
    path: Path,
    *,
    rank: int | None,
    follow: bool,
    tail: int | None,
    finished: Callable[[], bool],
) -> Iterator[str]:
    """Lines of the combined log; with `follow`, keep yielding until `finished()` and drained."""
    select = _select(rank)
    reader = _Reader(path)
    done = not follow or finished()
    selected = (s for s in map(select, reader.read_lines(final=done)) if s is not None)
    yield from collections.deque(selected, maxlen=tail) if tail is not None else selected
    delay = 0.05
    while not done:
        time.sleep(delay)
        done = finished()
        lines = [s for s in map(select, reader.read_lines(final=done)) if s is not None]
        yield from lines
        delay = 0.05 if lines else min(delay * 1.5, _MAX_POLL)
