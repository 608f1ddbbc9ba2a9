"""A job's combined log, the same for every backend: each replica line as `[rank N] line`.

One rank's view is therefore a prefix filter, and the tail is the last lines that pass it.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rlaunch.secrets import Scrubber

MAX_LINE_BYTES = 64 * 1024  # a longer line reaches the log in pieces


def rank_prefix(rank: int) -> str:
    """How every backend marks a replica's line in a job's combined log."""
    return f"[rank {rank}] "


def rank_filter(rank: int | None) -> Callable[[str], str | None]:
    """Keep one rank's lines, without their prefix (None: every line as is)."""
    if rank is None:
        return lambda line: line
    prefix = rank_prefix(rank)
    return lambda line: line[len(prefix) :] if line.startswith(prefix) else None


def pick_lines(lines: Iterable[str], pick: Callable[[str], str | None], tail: int | None = None) -> Iterable[str]:
    """The lines `pick` keeps (as it rewrites them); only the last `tail` of them when given."""
    kept = (p for p in map(pick, lines) if p is not None)
    return collections.deque(kept, maxlen=tail) if tail is not None else kept


@dataclass(frozen=True)
class LogQuery:
    """What a caller asked of a job's log, checked; a backend's reader answers it."""

    pick: Callable[[str], str | None]  # see `rank_filter`
    follow: bool  # keep reading until `finished()` and everything is read
    tail: int | None
    finished: Callable[[], bool]

    @classmethod
    def checked(
        cls,
        job_id: str,
        replicas: int,
        replica: int | None,
        follow: bool,
        tail: int | None,
        finished: Callable[[], bool],
    ) -> LogQuery:
        if replica is not None and not 0 <= replica < replicas:
            raise ValueError(f"job {job_id} has replicas 0..{replicas - 1}; there is no replica {replica}")
        if tail is not None and tail < 0:
            raise ValueError(f"tail={tail} cannot be negative")
        return cls(pick=rank_filter(replica), follow=follow, tail=tail, finished=finished)


class LineBuffer:
    """Splits a replica's output stream into lines of bounded length. An overlong line is cut where
    no secret straddles the cut, so a credential across a read boundary is still scrubbed whole."""

    def __init__(self, scrubber: Scrubber) -> None:
        self.partial = b""
        self.scrubber = scrubber

    def feed(self, data: bytes) -> list[bytes]:
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        if len(self.partial) > MAX_LINE_BYTES:
            cut = self.scrubber.safe_cut(self.partial)
            lines.append(self.partial[:cut])
            self.partial = self.partial[cut:]
        return lines

    def close(self) -> list[bytes]:
        """What is left of an unterminated last line."""
        rest, self.partial = self.partial, b""
        return [rest] if rest else []
