"""A job's log through the Ray Jobs API: whole, the tail, one rank, or followed.

The driver writes every replica line into the job's log as `[rank N] line` (and its own notes as
`[rlaunch] ...`), so one rank's view is a prefix filter, exactly like the local backend. The
unfiltered log is Ray's log as is: it also shows what Ray printed before the driver started (and
a driver's traceback if it could not start), which is what one needs when a job never ran.

Following streams the log over the Jobs API's websocket (`tail_job_logs`) in a background
thread, and checks the job's state meanwhile: once it is terminal, whatever the stream has not
delivered yet is read in one request, so a follow ends as soon as the job does (the websocket
alone notices the end only seconds later).
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

from rlaunch.cluster.combined_log import LogQuery, pick_lines

STATE_POLL_SECONDS = 0.5


def split_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


class _Stream:
    """`client.tail_job_logs(job_id)` in a daemon thread, feeding text chunks into a queue."""

    def __init__(self, client: Any, job_id: str) -> None:
        self.chunks: queue.Queue[str | None] = queue.Queue()
        self.loop = asyncio.new_event_loop()
        self.task: asyncio.Task[None] | None = None
        self.thread = threading.Thread(target=self._run, args=(client, job_id), daemon=True, name=f"ray-logs-{job_id}")
        self.thread.start()

    def _run(self, client: Any, job_id: str) -> None:
        # Ray's own websocket call trips an aiohttp deprecation; nothing a caller could act on.
        warnings.filterwarnings("ignore", message="ssl=None is deprecated", category=DeprecationWarning)

        async def pump() -> None:
            async for chunk in client.tail_job_logs(job_id):
                self.chunks.put(chunk)

        try:
            self.task = self.loop.create_task(pump())
            with contextlib.suppress(BaseException):  # cancelled, or the stream broke: the final read covers it
                self.loop.run_until_complete(self.task)
        finally:
            self.chunks.put(None)
            self.loop.close()

    def close(self) -> None:
        if self.task is not None and not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self.task.cancel)
            except RuntimeError:
                pass  # the loop closed meanwhile


def read_logs(client: Any, job_id: str, query: LogQuery) -> Iterator[str]:
    """Lines of the job's log; with `follow`, keep yielding until the job is terminal and drained."""
    pick, finished = query.pick, query.finished
    if not query.follow or finished():
        yield from pick_lines(split_lines(client.get_job_logs(job_id)), pick, query.tail)
        return
    consumed = 0  # characters of the log already turned into lines (or skipped by `tail`)
    partial = ""
    if query.tail is not None:
        text = client.get_job_logs(job_id)
        complete = text[: text.rfind("\n") + 1]
        consumed = len(complete)
        yield from pick_lines(split_lines(complete), pick, query.tail)
    stream = _Stream(client, job_id)
    seen = 0  # characters the stream delivered

    def take(fresh: str) -> list[str]:
        nonlocal partial, consumed
        consumed += len(fresh)
        pieces = (partial + fresh).split("\n")
        partial = pieces.pop()
        return list(pick_lines(pieces, pick))

    try:
        next_check = time.monotonic() + STATE_POLL_SECONDS
        while True:
            try:
                chunk = stream.chunks.get(timeout=0.1)
            except queue.Empty:
                chunk = ""
            if chunk is None:  # the stream ended: the job is over, or the stream broke
                break
            if chunk:
                start = max(consumed - seen, 0)
                seen += len(chunk)
                yield from take(chunk[start:])
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + STATE_POLL_SECONDS
                if finished():
                    break
    finally:
        stream.close()
    while not finished():  # the stream broke while the job runs: poll the log instead
        time.sleep(1.0)  # a stream, not a wait: it yields lines as they come (wait_until returns once)
        yield from take(client.get_job_logs(job_id)[consumed:])
    # The job is terminal, so its log is complete: read what the stream had not delivered.
    rest = partial + client.get_job_logs(job_id)[consumed:]
    yield from pick_lines(split_lines(rest), pick)
