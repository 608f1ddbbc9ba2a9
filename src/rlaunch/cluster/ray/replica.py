"""One replica attempt as a local process tree: the keeper, the replica, its output as events.

`run_attempt` is what runs where a replica runs: inside the driver for an entrypoint job, inside
a Ray task (in its placement-group bundle) for a placement-group job. It yields events:

    ("started", {"pid": keeper pid})
    ("out", [line, ...])          output lines (stdout and stderr merged), in batches
    ("exit", code)                the attempt's exit code, last (or ("error", why) if unknown)

Leaving the generator early (Ray cancelling the task raises KeyboardInterrupt in it,
`should_stop()` turning true, or any error) stops the keeper, which stops the replica's group.
No Ray import here.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from rlaunch.cluster.combined_log import LineBuffer
from rlaunch.cluster.job_environment import replica_base
from rlaunch.cluster.protocol import RANK_ENV, RENDEZVOUS_ENV
from rlaunch.cluster.ray.contract import DEVICE_VARIABLES, NODE_ID_ENV, NODE_IP_ENV
from rlaunch.secrets import Scrubber

KEEPER_MODULE = "rlaunch.cluster.ray.keeper"
BATCH_SECONDS = 0.1
BATCH_LINES = 500
POLL_SECONDS = 0.1
DRAIN_SECONDS = 1.0
KEEPER_EXTRA_SECONDS = 6.0  # beyond the grace: how long a keeper may take before its group is killed

Event = tuple[str, Any]


def replica_environment(
    job_env: Mapping[str, str],
    *,
    rank: int,
    rendezvous: str,
    node_id: str | None = None,
    node_ip: str | None = None,
    accelerators: int = 0,
    source: Mapping[str, str] = os.environ,
) -> dict[str, str]:
    """The allow-listed base of *this* node, defaults, the job's variables, then rank and placement.

    `job_env` is spec.env plus the backend's RLAUNCH_* variables (the driver builds it). Nothing
    else of the Ray worker's environment reaches the replica (no RAY_ADDRESS, no Ray internals),
    except device visibility when the replica holds accelerators.
    """
    env = replica_base(job_env, source)
    if accelerators > 0:
        env.update({k: source[k] for k in DEVICE_VARIABLES if k in source})
    env[RANK_ENV] = str(rank)
    env[RENDEZVOUS_ENV] = rendezvous
    if node_id:
        env[NODE_ID_ENV] = node_id
    if node_ip:
        env[NODE_IP_ENV] = node_ip
    return env


def replica_cwd(uploaded: bool, hint: str | None) -> str:
    """Where a replica runs: the job's uploaded working_dir (the process's cwd on this node), else
    the spec's working_dir when this node has it (a shared filesystem, a one-machine cluster),
    else wherever Ray started us."""
    if not uploaded and hint and os.path.isdir(hint):
        return hint
    return os.getcwd()


def _text(lines: list[bytes]) -> list[str]:
    return [line.decode("utf-8", errors="replace") for line in lines]


class _Keeper:
    """The starter's side of one keeper: its pid, its status pipe and the lifeline we hold."""

    def __init__(self, request: dict[str, Any]) -> None:
        out_r, out_w = os.pipe()
        status_r, status_w = os.pipe()
        life_r, life_w = os.pipe()
        try:
            starter = subprocess.Popen(
                [sys.executable, "-m", KEEPER_MODULE, str(status_w)],
                stdin=life_r,
                stdout=out_w,
                stderr=out_w,
                pass_fds=(status_w,),
            )
        except BaseException:
            for fd in (out_r, status_r, life_w):
                os.close(fd)
            raise
        finally:
            for fd in (out_w, status_w, life_r):
                os.close(fd)
        starter.wait()  # it exits as soon as the keeper has forked off
        self.output, self.status, self.lifeline = out_r, status_r, life_w
        self.pid: int | None = None
        self.code: int | None = None
        self.gone = False  # its status pipe closed: the keeper has exited (or was killed)
        self._status_buffer = b""
        self.stop_sent_at: float | None = None
        self.killed = False
        try:
            os.write(self.lifeline, (json.dumps(request) + "\n").encode())
        except BrokenPipeError:
            pass  # the keeper died at once; its status pipe says so

    def read_status(self) -> None:
        data = os.read(self.status, 4096)
        if not data:
            self.gone = True
            return
        self._status_buffer += data
        *lines, self._status_buffer = self._status_buffer.split(b"\n")
        for line in lines:
            kind, _, value = line.decode().partition(" ")
            if kind == "pid":
                self.pid = int(value)
            elif kind == "exit":
                self.code = int(value)

    def stop(self, grace: float) -> None:
        """Ask the keeper to stop its group; kill the group outright if it does not manage in time."""
        if self.gone:
            return
        now = time.monotonic()
        if self.stop_sent_at is None:
            self.stop_sent_at = now
            self.close_lifeline()
            if self.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGTERM)
        elif not self.killed and now - self.stop_sent_at > grace + KEEPER_EXTRA_SECONDS and self.pid is not None:
            self.killed = True
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)

    def close_lifeline(self) -> None:
        if self.lifeline >= 0:
            os.close(self.lifeline)
            self.lifeline = -1

    def wait_gone(self, grace: float) -> None:
        """Stop the keeper (if still running) and wait until it has exited."""
        while not self.gone:
            self.stop(grace)
            readable, _, _ = select.select([self.status], [], [], POLL_SECONDS)
            if readable:
                self.read_status()

    def close(self) -> None:
        self.close_lifeline()
        for fd in (self.output, self.status):
            with contextlib.suppress(OSError):
                os.close(fd)


def run_attempt(
    argv: list[str],
    env: Mapping[str, str],
    cwd: str | None,
    grace: float,
    should_stop: Callable[[], bool] = lambda: False,
) -> Iterator[Event]:
    """Run one attempt under a keeper; yield its output in batches, then its exit code."""
    keeper = _Keeper({"argv": list(argv), "env": dict(env), "cwd": cwd, "grace": grace})
    finished = False
    try:
        selector = selectors.DefaultSelector()
        selector.register(keeper.output, selectors.EVENT_READ, "out")
        selector.register(keeper.status, selectors.EVENT_READ, "status")
        lines = LineBuffer(Scrubber.for_process(env))
        pending: list[str] = []
        last_flush = time.monotonic()
        announced = False
        output_open = True
        gone_at: float | None = None
        while output_open or not keeper.gone:
            if should_stop() or keeper.stop_sent_at is not None:
                keeper.stop(grace)
            for key, _ in selector.select(POLL_SECONDS):
                if key.data == "status":
                    keeper.read_status()
                    if keeper.gone:
                        selector.unregister(keeper.status)
                    continue
                data = os.read(keeper.output, 65536)
                if data:
                    pending.extend(_text(lines.feed(data)))
                else:
                    output_open = False
                    selector.unregister(keeper.output)
            if keeper.pid is not None and not announced:
                announced = True
                yield ("started", {"pid": keeper.pid})
            if keeper.gone and output_open:
                # A process that escaped the group may hold the pipe open: drain briefly, then stop.
                gone_at = gone_at or time.monotonic()
                if time.monotonic() - gone_at > DRAIN_SECONDS:
                    output_open = False
            if pending and (
                not output_open or len(pending) >= BATCH_LINES or time.monotonic() - last_flush >= BATCH_SECONDS
            ):
                yield ("out", pending)
                pending, last_flush = [], time.monotonic()
        selector.close()
        tail = _text(lines.close())
        if pending or tail:
            yield ("out", pending + tail)
        finished = True
        if keeper.code is None:
            yield ("error", "its keeper process ended without reporting an exit code (killed?)")
        else:
            yield ("exit", keeper.code)
    finally:
        if not finished:
            keeper.wait_gone(grace)
        keeper.close()
