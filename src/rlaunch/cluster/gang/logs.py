"""Reading a job's combined log (`[rank N] line`), optionally one rank, the tail, or following it.

The supervisor writes every replica's output into one file in arrival order, so interleaving is
the order lines were produced and one rank's view is a prefix filter. Following checks whether
the job is finished *before* reading: a job is marked finished only after its output is written,
so the read that follows that check drains everything.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from rlaunch.cluster.combined_log import LogQuery, pick_lines

# A follower notices a job's end at most this late: the launch host follows its child gang and the
# submitter its coordinator, so this pause is paid twice per launch. A look is two small file reads.
_MAX_POLL = 0.1


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


def read_log(path: Path, query: LogQuery) -> Iterator[str]:
    """Lines of the combined log; with `follow`, keep yielding until `query.finished()` and drained."""
    reader = _Reader(path)
    done = not query.follow or query.finished()
    yield from pick_lines(reader.read_lines(final=done), query.pick, query.tail)
    delay = 0.05
    while not done:  # a stream, not a wait: it yields lines as they come (wait_until returns once)
        time.sleep(delay)
        done = query.finished()
        lines = list(pick_lines(reader.read_lines(final=done), query.pick))
        yield from lines
        delay = 0.05 if lines else min(delay * 1.5, _MAX_POLL)
