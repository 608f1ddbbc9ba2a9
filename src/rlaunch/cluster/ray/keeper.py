"""`python -m rlaunch.cluster.ray.keeper STATUS_FD`: the process-group leader of one replica attempt.

Why it exists: when a Ray worker exits (its task was cancelled hard, its job's driver is gone,
it crashed), the raylet kills the worker's process group and its *direct* children, but not their
descendants: a replica started straight from the task would be orphaned and keep running. And
Ray's `stop_job` SIGKILLs the driver's whole process tree 3 s after SIGTERM, too soon for a
replica's own grace period. So the keeper detaches (it forks, the process its starter started
exits, and the fork calls setsid: nobody's direct child, leader of its own session and process
group), runs the replica in its group, and stops that group (SIGTERM, then SIGKILL after `grace`
seconds) whenever the attempt must end:

  * the replica exited: whatever it left behind in the group is stopped too;
  * SIGTERM / SIGINT / SIGHUP: the attempt is being stopped;
  * its lifeline broke: stdin is a pipe whose other end the starter keeps open for as long as it
    wants the attempt; EOF means the starter is gone, however it died.

Protocol: stdin carries one JSON line `{"argv", "env", "cwd", "grace"}` (the environment may hold
credentials, so it never travels on a command line), then stays open as the lifeline. On
STATUS_FD the keeper writes `pid <keeper pid>` once running and `exit <code>` at the end (128 + N
when signal N ended the replica, 127 when it could not start). The replica's stdout and stderr
are the keeper's. Only the standard library (and the stdlib-only `rlaunch.waiting`) is imported:
one keeper starts per attempt.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from types import FrameType
from typing import Any

from rlaunch.waiting import WaitTimeout, wait_until

POLL_SECONDS = 0.05
START_FAILED_EXIT = 127
AFTER_KILL_SECONDS = 5.0


def _group_members(pgid: int, exclude: int) -> list[int]:
    """Live (non-zombie) processes of group `pgid`, other than `exclude`."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == exclude:
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                fields = handle.read().rpartition(")")[2].split()
        except OSError:
            continue
        if fields and fields[0] not in ("Z", "X") and fields[2] == str(pgid):
            members.append(int(entry))
    return members


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def stop_group(pgid: int, me: int, grace: float, reap: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM every other member of the group, SIGKILL what is left after `grace` seconds."""
    members = _group_members(pgid, me)
    if not members:
        return
    _signal_all(members, signal.SIGTERM)

    def all_gone() -> bool:
        nonlocal members
        if reap is not None:
            reap.poll()
        members = _group_members(pgid, me)
        return not members

    for wait, then in ((grace, signal.SIGKILL), (AFTER_KILL_SECONDS, None)):
        with contextlib.suppress(WaitTimeout):
            wait_until(all_gone, wait, f"process group {pgid} to exit", POLL_SECONDS)
        if then is not None and members:
            _signal_all(members, then)
    if reap is not None:
        reap.poll()


def exit_status(code: int) -> int:
    """A Popen return code as a shell reports it (killed by signal N -> 128 + N)."""
    return 128 - code if code < 0 else code


def _read_request() -> dict[str, Any]:
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(0, 65536)
        if not chunk:
            break
        line += chunk
    request: dict[str, Any] = json.loads(line)
    return request


def _lifeline_broken() -> bool:
    readable, _, _ = select.select([0], [], [], 0)
    return bool(readable) and os.read(0, 4096) == b""


def keep(status_fd: int) -> int:
    me = os.getpid()
    stopped: list[str] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopped.append(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, on_signal)
    # Ray blocks SIGINT in its processes and the mask is inherited: give the replica the default.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    os.write(status_fd, f"pid {me}\n".encode())
    request = _read_request()
    argv = [str(a) for a in request["argv"]]
    grace = float(request.get("grace") or 5.0)
    try:
        proc = subprocess.Popen(
            argv, env=dict(request["env"]), cwd=request.get("cwd") or None, stdin=subprocess.DEVNULL
        )
    except OSError as exc:
        print(f"[rlaunch] could not start {argv[0]!r}: {exc}", flush=True)
        return START_FAILED_EXIT
    wait_until(
        lambda: proc.poll() is not None or stopped or _lifeline_broken(),
        None,
        "the replica to exit, a stop signal or the lifeline to break",
        POLL_SECONDS,
    )
    # The replica ended, or the attempt is being stopped, or the starter is gone: nothing of this
    # attempt may keep running.
    stop_group(me, me, grace, proc)
    return exit_status(proc.wait())


def main() -> int:
    status_fd = int(sys.argv[1])
    if os.fork():
        os._exit(0)  # the starter reaps this process at once; the keeper is its child, now orphaned
    os.setsid()  # its own session and process group (pgid = its pid); its parent is init or a subreaper
    code = START_FAILED_EXIT
    try:
        code = keep(status_fd)
    finally:
        sys.stdout.flush()
        with contextlib.suppress(OSError):
            os.write(status_fd, f"exit {code}\n".encode())
    return code


if __name__ == "__main__":
    sys.exit(main())
