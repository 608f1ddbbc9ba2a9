"""The detached process that owns one local job from gang start to terminal state.

`python -m rlaunch.cluster.local.supervisor <job_dir>` reads `{"argv": [...], "env": {...}}` on
stdin: the job's real argv and environment may hold credentials, so they are never written to
disk. It then forks: the parent records the child's pid in supervisor.json and exits, so the
submitter returns at once and never has to reap it. The child (the supervisor proper) starts
every replica together, copies their output into the logs, retries failed replicas, enforces the
timeout, obeys cancel requests, watches its parent job, and when the job ends cancels its
children before writing the terminal state.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any, NamedTuple

from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.cluster.local.procs import process_identity, stop_groups
from rlaunch.cluster.local.state import JobDir, cancel_message, now_iso, write_json_atomic
from rlaunch.cluster.protocol import RANK_ENV, RENDEZVOUS_ENV, JobNotFoundError, JobState
from rlaunch.secrets import secret_values

POLL_SECONDS = 0.1
PARENT_CHECK_SECONDS = 1.0
DRAIN_SECONDS = 1.0
MAX_LINE_BYTES = 64 * 1024
START_FAILED_EXIT = 127  # what a shell reports for a command it could not run


class _Outcome(NamedTuple):
    state: JobState
    message: str | None
    unfinished_become: JobState  # what replicas not yet finished when the job ends are recorded as


@dataclass
class _Replica:
    rank: int
    state: JobState = JobState.PENDING
    attempts: int = 0
    exit_codes: list[int] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    start_error: int | None = None
    log: IO[bytes] | None = None
    partial: bytes = b""
    started_at: str | None = None
    finished_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "state": self.state.value,
            "attempts": self.attempts,
            "exit_code": self.exit_codes[-1] if self.exit_codes else None,
            "exit_codes": self.exit_codes,
            "pid": self.proc.pid if self.proc else None,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
        }


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _say(message: str) -> None:
    print(f"{now_iso()} {message}", file=sys.stderr, flush=True)


class Supervisor:
    """Runs one job; the only writer of its state.json while alive."""

    def __init__(self, job: JobDir, argv: list[str], env: dict[str, str]) -> None:
        self.job = job
        self.record = job.read_job()
        self.state = job.read_state()
        self.argv = argv
        self.env = env
        self.secrets = [s.encode() for s in secret_values(env)]
        self.backend = LocalBackend(root=job.root, kill_grace=float(self.record["kill_grace"]))
        self.replicas = [_Replica(rank) for rank in range(self.record["replicas"])]
        self.selector = selectors.DefaultSelector()
        self.combined = open(job.combined_log, "ab")
        self.rendezvous = f"127.0.0.1:{_free_port()}"
        self.signalled: str | None = None
        self.next_parent_check = 0.0

    def run(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        try:
            outcome = self._stop_requested() or self._supervise()
        except Exception as exc:
            traceback.print_exc()
            outcome = _Outcome(
                JobState.FAILED, f"supervisor error: {exc!r} (see {self.job.supervisor_log})", JobState.FAILED
            )
        self._finish(outcome)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signalled = signal.Signals(signum).name

    # -- the main loop -------------------------------------------------------------------------

    def _supervise(self) -> _Outcome:
        self.state.update(state=JobState.RUNNING.value, started_at=now_iso(), rendezvous=self.rendezvous)
        for replica in self.replicas:
            self._start(replica)
        self._save()
        timeout = self.record["timeout_seconds"]
        deadline = time.monotonic() + timeout if timeout else None
        max_attempts = self.record["max_retries"] + 1
        while True:
            self._pump(POLL_SECONDS)
            stop = self._stop_requested()
            if stop:
                return stop
            if deadline is not None and time.monotonic() >= deadline:
                return _Outcome(
                    JobState.FAILED,
                    f"timed out after {timeout:g}s (timeout_seconds); stopped every replica",
                    JobState.FAILED,
                )
            changed = False
            for replica in self.replicas:
                code = self._exit_code(replica)
                if replica.state != JobState.RUNNING or code is None:
                    continue
                changed = True
                self._end_attempt(replica, code)
                if code == 0:
                    replica.state = JobState.SUCCEEDED
                elif replica.attempts < max_attempts:
                    _say(f"rank {replica.rank} attempt {replica.attempts} exited {code}; retrying")
                    self._start(replica)
                else:
                    replica.state = JobState.FAILED
                    return _Outcome(
                        JobState.FAILED,
                        f"replica {replica.rank} failed: exit code {code} on attempt {replica.attempts} "
                        f"of {max_attempts}; stopped the other replicas",
                        JobState.CANCELLED,
                    )
            if all(r.state == JobState.SUCCEEDED for r in self.replicas):
                return _Outcome(JobState.SUCCEEDED, None, JobState.SUCCEEDED)
            if changed:
                self._save()

    def _stop_requested(self) -> _Outcome | None:
        """A cancel request, a signal to the supervisor, or the parent job having ended."""
        if self.signalled:
            self.job.request_cancel(f"supervisor received {self.signalled}")
        parent = self.record["parent"]
        if parent and not self.job.cancel_file.exists() and time.monotonic() >= self.next_parent_check:
            self.next_parent_check = time.monotonic() + PARENT_CHECK_SECONDS
            try:
                parent_state = self.backend.status(parent).state
            except JobNotFoundError:
                parent_state = None
            if parent_state is None or parent_state.terminal:
                ended = parent_state.value if parent_state else "its record is gone"
                self.job.request_cancel(f"parent job {parent} ended ({ended})")
        cancel = self.job.read_cancel()
        return _Outcome(JobState.CANCELLED, cancel_message(cancel), JobState.CANCELLED) if cancel else None

    # -- replicas ------------------------------------------------------------------------------

    def _start(self, replica: _Replica) -> None:
        replica.attempts += 1
        replica.state = JobState.RUNNING
        replica.started_at, replica.finished_at = now_iso(), None
        replica.log = open(self.job.attempt_log(replica.rank, replica.attempts), "ab")
        env = {**self.env, RANK_ENV: str(replica.rank), RENDEZVOUS_ENV: self.rendezvous}
        try:
            replica.proc = subprocess.Popen(
                self.argv,
                cwd=self.record["working_dir"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        except OSError as exc:
            replica.proc, replica.start_error = None, START_FAILED_EXIT
            self._write(replica, f"[rlaunch] could not start {self.argv[0]!r}: {exc}\n".encode())
            self._flush(replica)
            return
        replica.start_error = None
        assert replica.proc.stdout is not None
        self.selector.register(replica.proc.stdout, selectors.EVENT_READ, replica)
        _say(f"rank {replica.rank} attempt {replica.attempts} started: pid {replica.proc.pid}")

    def _exit_code(self, replica: _Replica) -> int | None:
        return replica.proc.poll() if replica.proc else replica.start_error

    def _end_attempt(self, replica: _Replica, code: int) -> None:
        """Record one attempt's end; whatever it left running in its process group is stopped."""
        if replica.proc:
            stop_groups([replica.proc.pid], self.backend.kill_grace, tick=lambda: self._pump(0))
            self._drain(replica)
        replica.exit_codes.append(code)
        replica.finished_at = now_iso()
        if replica.log:
            replica.log.close()
        _say(f"rank {replica.rank} attempt {replica.attempts} exited {code}")

    # -- output --------------------------------------------------------------------------------

    def _pump(self, timeout: float) -> None:
        """Copy whatever replicas have printed into their attempt log and the combined log."""
        if not self.selector.get_map():
            time.sleep(timeout)
            return
        touched: list[_Replica] = []
        for key, _ in self.selector.select(timeout):
            replica: _Replica = key.data
            data = os.read(key.fd, 65536)
            if data:
                self._output(replica, data)
            else:
                self._close_pipe(replica)
            touched.append(replica)
        for replica in touched:
            self._flush(replica)

    def _output(self, replica: _Replica, data: bytes) -> None:
        lines = (replica.partial + data).split(b"\n")
        replica.partial = lines.pop()
        if len(replica.partial) > MAX_LINE_BYTES:
            lines.append(replica.partial)
            replica.partial = b""
        for line in lines:
            self._write(replica, line + b"\n")

    def _write(self, replica: _Replica, line: bytes) -> None:
        for secret in self.secrets:
            line = line.replace(secret, b"<redacted>")
        if replica.log:
            replica.log.write(line)
        self.combined.write(b"[rank %d] " % replica.rank + line)

    def _flush(self, replica: _Replica) -> None:
        if replica.log and not replica.log.closed:
            replica.log.flush()
        self.combined.flush()

    def _close_pipe(self, replica: _Replica) -> None:
        if replica.partial:
            self._write(replica, replica.partial + b"\n")
            replica.partial = b""
        assert replica.proc is not None and replica.proc.stdout is not None
        self.selector.unregister(replica.proc.stdout)
        replica.proc.stdout.close()
        self._flush(replica)

    def _drain(self, replica: _Replica) -> None:
        """Read a finished attempt's pipe to the end (bounded: an escaped daemon may hold it open)."""
        assert replica.proc is not None and replica.proc.stdout is not None
        deadline = time.monotonic() + DRAIN_SECONDS
        while not replica.proc.stdout.closed and time.monotonic() < deadline:
            self._pump(0.05)
        if not replica.proc.stdout.closed:
            self._close_pipe(replica)

    # -- the end -------------------------------------------------------------------------------

    def _tick(self) -> None:
        self._pump(0)
        for replica in self.replicas:
            if replica.proc:
                replica.proc.poll()

    def _finish(self, outcome: _Outcome) -> None:
        unfinished = [r for r in self.replicas if not r.state.terminal]
        stop_groups([r.proc.pid for r in unfinished if r.proc], self.backend.kill_grace, tick=self._tick)
        for replica in unfinished:
            code = self._exit_code(replica)
            if replica.proc:
                self._drain(replica)
            if code is not None:
                replica.exit_codes.append(code)
            replica.state = outcome.unfinished_become
            replica.finished_at = now_iso()
            if replica.log:
                replica.log.close()
        try:
            self.backend.cancel_children(
                self.job.job_id, reason=f"parent job {self.job.job_id} ended ({outcome.state.value})"
            )
        except Exception:
            traceback.print_exc()
        self.state.update(
            state=outcome.state.value,
            message=outcome.message,
            finished_at=now_iso(),
            cancel=self.job.read_cancel() if outcome.state == JobState.CANCELLED else None,
        )
        self._save()
        self.combined.close()
        _say(f"job {outcome.state.value}" + (f": {outcome.message}" if outcome.message else ""))

    def _save(self) -> None:
        self.state["replicas"] = [r.to_json() for r in self.replicas]
        self.job.write_state(self.state)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(
            "usage: python -m rlaunch.cluster.local.supervisor <job_dir>  (job argv and env as JSON on stdin)",
            file=sys.stderr,
        )
        return 2
    path = Path(args[0])
    job = JobDir(path.parent, path.name)
    payload = json.loads(sys.stdin.read())
    pid = os.fork()
    if pid:
        write_json_atomic(
            job.supervisor_file,
            {"pid": pid, "identity": process_identity(pid), "host": socket.gethostname(), "started_at": now_iso()},
        )
        return 0
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    Supervisor(job, payload["argv"], payload["env"]).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
