"""The supervisor: the process that owns one job of the gang engine from gang start to terminal state.

Each transport's job driver runs it (`rlaunch.cluster.local.job_driver`, detached on this machine;
`rlaunch.cluster.slurm.job_driver`, the batch script on the allocation's first node), with the
job's argv and environment in memory (they may hold credentials, so they are never written to
disk) and the transport's engine, which says how a replica runs. It starts every replica together, copies their output into the logs, retries failed replicas, enforces the
timeout, obeys cancel requests, watches its parent job, and when the job ends cancels its
children before writing the terminal state.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from types import FrameType
from typing import IO

from rlaunch.cluster import lifecycle
from rlaunch.cluster.combined_log import LineBuffer, rank_prefix
from rlaunch.cluster.gang.engine import GangEngine
from rlaunch.cluster.gang.procs import stop_groups
from rlaunch.cluster.gang.state import JobDir
from rlaunch.cluster.lifecycle import Decision, GangLifecycle, Outcome
from rlaunch.cluster.protocol import RANK_ENV, RENDEZVOUS_ENV, JobNotFoundError, JobState
from rlaunch.secrets import Scrubber
from rlaunch.storage import utc_now

POLL_SECONDS = 0.1
DRAIN_SECONDS = 1.0
START_FAILED_EXIT = 127  # what a shell reports for a command it could not run


@dataclass
class _Attempt:
    """The transport's side of a replica's current attempt: its process and its output."""

    rank: int
    proc: subprocess.Popen[bytes] | None = None
    start_error: int | None = None
    log: IO[bytes] | None = None
    lines: LineBuffer | None = None


def _say(message: str) -> None:
    print(f"{utc_now()} {message}", file=sys.stderr, flush=True)


class Supervisor:
    """Runs one job; the only writer of its state.json while alive."""

    def __init__(
        self,
        job: JobDir,
        argv: list[str],
        env: dict[str, str],
        known: list[str] | None = None,
        *,
        backend: GangEngine,
    ) -> None:
        self.job = job
        self.record = job.read_job()
        self.state = job.read_state()
        self.argv = argv
        self.env = env
        self.scrubber = Scrubber.for_process(env, known=known or ())  # the submitter's secrets too
        self.backend = backend
        self.gang = GangLifecycle(
            job.job_id,
            self.record["replicas"],
            max_retries=self.record["max_retries"],
            timeout_seconds=self.record["timeout_seconds"],
            parent=self.record["parent"],
        )
        self.attempts = [_Attempt(rank) for rank in range(self.record["replicas"])]
        self.selector = selectors.DefaultSelector()
        self.combined = open(job.combined_log, "ab")
        self.rendezvous = self.backend.gang_rendezvous()
        self.signalled: str | None = None

    def run(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        try:
            outcome = self._stop_requested() or self._supervise()
        except Exception as exc:
            traceback.print_exc()
            outcome = lifecycle.failed(f"supervisor error: {exc!r} (see {self.job.supervisor_log})")
        self._finish(outcome)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signalled = signal.Signals(signum).name

    # -- the main loop -------------------------------------------------------------------------

    def _supervise(self) -> Outcome:
        self.gang.begin(time.monotonic())
        self.state["rendezvous"] = self.rendezvous
        for attempt in self.attempts:
            self._start(attempt)
        self._save()
        while True:
            self._pump(POLL_SECONDS)
            stop = self._stop_requested()
            if stop:
                return stop
            changed = False
            for attempt in self.attempts:
                code = self._exit_code(attempt)
                if self.gang.replicas[attempt.rank].state != JobState.RUNNING or code is None:
                    continue
                failure = self.backend.scheduler_failure(self.job.job_id)  # its step died with its node
                if failure:
                    return lifecycle.failed(f"{failure}; replica {attempt.rank}'s attempt ended (exit code {code})")
                if self.signalled:  # the signal came with the attempt's end: it decides, not the exit code
                    return self._stop_requested() or lifecycle.cancelled(f"supervisor received {self.signalled}")
                changed = True
                self._end_attempt(attempt, code)
                verdict = self.gang.attempt_ended(attempt.rank, code)
                if verdict.note:
                    _say(verdict.note)
                if verdict.decision is Decision.RETRY:
                    self._start(attempt)
                elif verdict.outcome is not None:
                    return verdict.outcome
            outcome = self.gang.check(time.monotonic())
            if outcome:
                return outcome
            if changed:
                self._save()

    def _stop_requested(self) -> Outcome | None:
        """A cancel request, a signal to the supervisor (a failure when the scheduler says its node
        failed, else a cancel), or the parent job having ended."""
        if self.signalled and not self.job.cancel_file.exists():
            failure = self.backend.scheduler_failure(self.job.job_id)
            if failure:
                return lifecycle.failed(f"{failure}; supervisor received {self.signalled}")
            self.job.request_cancel(f"supervisor received {self.signalled}")
        parent = self.gang.parent
        if parent and not self.job.cancel_file.exists() and self.gang.parent_due(time.monotonic()):
            try:
                parent_state = self.backend.status(parent).state
            except JobNotFoundError:
                parent_state = None
            if parent_state is None or parent_state.terminal:
                ended = parent_state.value if parent_state else "its record is gone"
                self.job.request_cancel(lifecycle.parent_ended_reason(parent, ended))
        cancel = self.job.read_cancel()
        return lifecycle.cancelled(lifecycle.cancel_message(cancel)) if cancel else None

    # -- replicas ------------------------------------------------------------------------------

    def _start(self, attempt: _Attempt) -> None:
        replica = self.gang.attempt_started(attempt.rank)
        attempt.log = open(self.job.attempt_log(attempt.rank, replica.attempts), "ab")
        attempt.lines = LineBuffer(self.scrubber)
        argv, env = self.backend.replica_command(
            attempt.rank, self.argv, {**self.env, RANK_ENV: str(attempt.rank), RENDEZVOUS_ENV: self.rendezvous}
        )
        try:
            attempt.proc = subprocess.Popen(
                argv,
                cwd=self.record["working_dir"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                process_group=0,
            )
        except OSError as exc:
            attempt.proc, attempt.start_error = None, START_FAILED_EXIT
            replica.details["pid"] = None
            self._write(attempt, f"[rlaunch] could not start {self.argv[0]!r}: {exc}\n".encode())
            self._flush(attempt)
            return
        attempt.start_error = None
        replica.details["pid"] = attempt.proc.pid
        assert attempt.proc.stdout is not None
        self.selector.register(attempt.proc.stdout, selectors.EVENT_READ, attempt)
        _say(f"rank {attempt.rank} attempt {replica.attempts} started: pid {attempt.proc.pid}")

    def _exit_code(self, attempt: _Attempt) -> int | None:
        return attempt.proc.poll() if attempt.proc else attempt.start_error

    def _end_attempt(self, attempt: _Attempt, code: int) -> None:
        """Close one attempt; whatever it left running in its process group is stopped."""
        if attempt.proc:
            stop_groups([attempt.proc.pid], self.backend.kill_grace, tick=lambda: self._pump(0))
            self._drain(attempt)
        if attempt.log:
            attempt.log.close()
        _say(f"rank {attempt.rank} attempt {self.gang.replicas[attempt.rank].attempts} exited {code}")

    # -- output --------------------------------------------------------------------------------

    def _pump(self, timeout: float) -> None:
        """Copy whatever attempts have printed into their attempt log and the combined log."""
        if not self.selector.get_map():
            time.sleep(timeout)  # nothing to select on: pause as long as select() would have
            return
        touched: list[_Attempt] = []
        for key, _ in self.selector.select(timeout):
            attempt: _Attempt = key.data
            data = os.read(key.fd, 65536)
            if data:
                self._output(attempt, data)
            else:
                self._close_pipe(attempt)
            touched.append(attempt)
        for attempt in touched:
            self._flush(attempt)

    def _output(self, attempt: _Attempt, data: bytes) -> None:
        assert attempt.lines is not None
        for line in attempt.lines.feed(data):
            self._write(attempt, line + b"\n")

    def _write(self, attempt: _Attempt, line: bytes) -> None:
        line = self.scrubber.bytes(line)
        if attempt.log:
            attempt.log.write(line)
        self.combined.write(rank_prefix(attempt.rank).encode() + line)

    def _flush(self, attempt: _Attempt) -> None:
        if attempt.log and not attempt.log.closed:
            attempt.log.flush()
        self.combined.flush()

    def _close_pipe(self, attempt: _Attempt) -> None:
        for line in attempt.lines.close() if attempt.lines else []:
            self._write(attempt, line + b"\n")
        assert attempt.proc is not None and attempt.proc.stdout is not None
        self.selector.unregister(attempt.proc.stdout)
        attempt.proc.stdout.close()
        self._flush(attempt)

    def _drain(self, attempt: _Attempt) -> None:
        """Read a finished attempt's pipe to the end (bounded: an escaped daemon may hold it open)."""
        assert attempt.proc is not None and attempt.proc.stdout is not None
        deadline = time.monotonic() + DRAIN_SECONDS
        while not attempt.proc.stdout.closed and time.monotonic() < deadline:
            self._pump(0.05)
        if not attempt.proc.stdout.closed:
            self._close_pipe(attempt)

    # -- the end -------------------------------------------------------------------------------

    def _tick(self) -> None:
        self._pump(0)
        for attempt in self.attempts:
            if attempt.proc:
                attempt.proc.poll()

    def _finish(self, outcome: Outcome) -> None:
        self.gang.stop(outcome)
        unfinished = [a for a in self.attempts if self.gang.replicas[a.rank].state == JobState.RUNNING]
        if outcome.state != JobState.SUCCEEDED:  # each stopped replica's log says why it ended
            for attempt in unfinished:
                self._write(attempt, f"[rlaunch.local] stopping this replica: {outcome.message}\n".encode())
                self._flush(attempt)
        stop_groups([a.proc.pid for a in unfinished if a.proc], self.backend.kill_grace, tick=self._tick)
        for attempt in unfinished:
            code = self._exit_code(attempt)
            if attempt.proc:
                self._drain(attempt)
            if code is not None:
                self.gang.attempt_ended(attempt.rank, code)
            if attempt.log:
                attempt.log.close()
        self.gang.finish(outcome)
        try:
            self.backend.cancel_children(self.job.job_id, reason=self.gang.children_reason())
        except Exception:
            traceback.print_exc()
        self.state["cancel"] = self.job.read_cancel() if outcome.state == JobState.CANCELLED else None
        self._save()
        self.combined.close()
        _say(lifecycle.outcome_line(outcome))

    def _save(self) -> None:
        self.state.update(self.gang.record())
        self.job.write_state(self.state)
