"""One gang's lifecycle, the same for every backend: replicas, attempts, retries, the deadline,
the parent watch, stopping the others and the finish, with the messages people read.

Pure: no processes, no Ray, no sockets and no clock of its own (callers pass `now`, a
`time.monotonic()` reading), so every rule is table-tested. A backend's gang driver (the local
supervisor, the Ray gang driver, ...) is a transport around it: it starts and stops attempts,
tells the lifecycle how each attempt ended and does what the answer says.

    begin(now)                  the gang is placed: running, the deadline starts
    attempt_started(rank)       one more attempt of a replica
    attempt_ended(rank, code)   -> Verdict: succeeded / retry / fail (an Outcome: stop the others)
    check(now)                  -> Outcome when every replica succeeded or the deadline passed
    parent_due(now)             whether to look at the parent job now (the watch's cadence)
    finish(outcome)             unfinished replicas take the outcome's state; the job is terminal

An attempt that ends while the gang is stopping is recorded with the state the outcome gives
unfinished replicas, never retried.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rlaunch.cluster.protocol import JobState, ReplicaStatus
from rlaunch.processes import actor
from rlaunch.storage import utc_now

PARENT_CHECK_SECONDS = 1.0  # how often a child gang looks at its parent job


class Outcome(NamedTuple):
    """How the job ends, and what replicas still running then are recorded as."""

    state: JobState
    message: str | None
    unfinished_become: JobState


SUCCEEDED = Outcome(JobState.SUCCEEDED, None, JobState.SUCCEEDED)


def cancelled(message: str) -> Outcome:
    return Outcome(JobState.CANCELLED, message, JobState.CANCELLED)


def failed(message: str) -> Outcome:
    """The gang driver itself failed (an error of the transport, not of a replica)."""
    return Outcome(JobState.FAILED, message, JobState.FAILED)


def cancel_request(reason: str | None) -> dict[str, Any]:
    """The record of a cancel request: who (user, host, pid), when and why."""
    return {**actor(), "at": utc_now(), "reason": reason}


def cancel_message(record: dict[str, Any]) -> str:
    """One line for a cancel record: `cancelled by user@host (pid N) at T: reason`."""
    text = f"cancelled by {record['user']}@{record['host']} (pid {record['pid']}) at {record['at']}"
    return f"{text}: {record['reason']}" if record.get("reason") else text


def parent_cancelled_reason(job_id: str, reason: str | None) -> str:
    """Why a descendant of a cancelled job is cancelled."""
    return f"parent job {job_id} was cancelled" + (f": {reason}" if reason else "")


def parent_ended_reason(parent: str, ended: str) -> str:
    """Why a child gang stops itself (or is stopped) when its parent job has ended."""
    return f"parent job {parent} ended ({ended})"


def outcome_line(outcome: Outcome) -> str:
    """The driver's last word on the job: `job <state>[: <message>]`."""
    return f"job {outcome.state.value}" + (f": {outcome.message}" if outcome.message else "")


class Decision(enum.Enum):
    SUCCEEDED = "succeeded"  # the replica is done; the gang may be too (see `check`)
    RETRY = "retry"  # start the replica's next attempt
    FAIL = "fail"  # retries exhausted: end the job with the verdict's outcome
    RECORDED = "recorded"  # the gang was already stopping: nothing more to do


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    note: str | None = None  # a line for the job's log
    outcome: Outcome | None = None


@dataclass
class ReplicaRecord:
    """One replica as recorded: state, attempts, exit codes; `details` are the transport's columns."""

    rank: int
    details: dict[str, Any] = field(default_factory=dict)
    state: JobState = JobState.PENDING
    attempts: int = 0
    exit_codes: list[int | None] = field(default_factory=list)
    started_at: str | None = None
    finished_at: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "state": self.state.value,
            "attempts": self.attempts,
            "exit_code": self.exit_codes[-1] if self.exit_codes else None,
            "exit_codes": list(self.exit_codes),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            **self.details,
        }


def replica_status(row: Mapping[str, Any], job: JobState, job_ended_at: str | None = None) -> ReplicaStatus:
    """A recorded replica row (`ReplicaRecord.to_json`) as the protocol reports it. Once the job is
    terminal, a replica its driver could not record (killed hard) takes the job's state and end."""
    state = JobState(row["state"])
    lost = job.terminal and not state.terminal
    return ReplicaStatus(
        rank=int(row["rank"]),
        state=job if lost else state,
        attempts=int(row.get("attempts") or 0),
        exit_code=row.get("exit_code"),
        started_at=row.get("started_at"),
        finished_at=row.get("finished_at") or (job_ended_at if job.terminal else None),
    )


class GangLifecycle:
    """The rules of one gang; the only thing that changes replica and job state."""

    def __init__(
        self,
        job_id: str,
        replicas: int,
        *,
        max_retries: int = 0,
        timeout_seconds: float | None = None,
        parent: str | None = None,
    ) -> None:
        self.job_id = job_id
        self.replicas = [ReplicaRecord(rank) for rank in range(replicas)]
        self.max_attempts = max_retries + 1
        self.timeout = float(timeout_seconds) if timeout_seconds else None
        self.parent = parent
        self.state = JobState.PENDING
        self.message: str | None = None
        self.started_at: str | None = None
        self.finished_at: str | None = None
        self.deadline: float | None = None
        self.stopping: Outcome | None = None
        self._next_parent_check = 0.0

    def begin(self, now: float) -> None:
        """The gang is placed and about to start: the job runs, and its deadline starts now."""
        self.state, self.started_at = JobState.RUNNING, utc_now()
        self.deadline = now + self.timeout if self.timeout else None

    def attempt_started(self, rank: int) -> ReplicaRecord:
        replica = self.replicas[rank]
        replica.attempts += 1
        replica.state = JobState.RUNNING
        replica.started_at, replica.finished_at = utc_now(), None
        return replica

    def attempt_ended(self, rank: int, code: int | None, why: str | None = None) -> Verdict:
        """Record an attempt's end (`code` None: it ended without one, `why` says how) and decide."""
        replica = self.replicas[rank]
        replica.exit_codes.append(code)
        replica.finished_at = utc_now()
        if self.stopping is not None:
            replica.state = self.stopping.unfinished_become
            return Verdict(Decision.RECORDED)
        if code == 0:
            replica.state = JobState.SUCCEEDED
            return Verdict(Decision.SUCCEEDED)
        how = f"exit code {code}" if code is not None else (why or "it ended without an exit code")
        if replica.attempts < self.max_attempts:
            return Verdict(Decision.RETRY, note=f"rank {rank} attempt {replica.attempts} failed ({how}); retrying")
        replica.state = JobState.FAILED
        message = (
            f"replica {rank} failed: {how} on attempt {replica.attempts} of {self.max_attempts}; "
            "stopped the other replicas"
        )
        return Verdict(Decision.FAIL, outcome=Outcome(JobState.FAILED, message, JobState.CANCELLED))

    def check(self, now: float) -> Outcome | None:
        """Success once every replica succeeded; else a timeout once the deadline has passed."""
        if all(r.state == JobState.SUCCEEDED for r in self.replicas):
            return SUCCEEDED
        if self.deadline is not None and now >= self.deadline:
            assert self.timeout is not None
            return Outcome(
                JobState.FAILED,
                f"timed out after {self.timeout:g}s (timeout_seconds); stopped every replica",
                JobState.FAILED,
            )
        return None

    def parent_due(self, now: float) -> bool:
        """True when a child gang should look at its parent now (at most every PARENT_CHECK_SECONDS)."""
        if self.parent is None or now < self._next_parent_check:
            return False
        self._next_parent_check = now + PARENT_CHECK_SECONDS
        return True

    def running(self) -> list[ReplicaRecord]:
        return [r for r in self.replicas if r.state == JobState.RUNNING]

    def stop(self, outcome: Outcome) -> None:
        """The job ends with `outcome`: from now on attempts that end are recorded, never retried."""
        self.stopping = self.stopping or outcome

    def finish(self, outcome: Outcome) -> Outcome:
        """Replicas not yet finished take the outcome's state; the job becomes terminal."""
        self.stop(outcome)
        for replica in self.replicas:
            if not replica.state.terminal:
                replica.state = outcome.unfinished_become
                replica.finished_at = replica.finished_at or utc_now()
        self.state, self.message, self.finished_at = outcome.state, outcome.message, utc_now()
        return outcome

    def children_reason(self) -> str:
        """Why this job's children are cancelled when it ends."""
        return parent_ended_reason(self.job_id, self.state.value)

    def record(self) -> dict[str, Any]:
        """The job's record as status readers expect it (state.json, the Ray KV)."""
        return {
            "state": self.state.value,
            "message": self.message,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "replicas": [r.to_json() for r in self.replicas],
        }
