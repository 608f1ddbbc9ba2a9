"""The gang lifecycle's rules, one table row each: no process, no clock, no backend."""

from __future__ import annotations

import pytest

from rlaunch.cluster import lifecycle
from rlaunch.cluster.lifecycle import PARENT_CHECK_SECONDS, Decision, GangLifecycle, Outcome
from rlaunch.cluster.protocol import JobState


def started(replicas: int = 2, *, max_retries: int = 0, timeout: float | None = None, parent: str | None = None):
    gang = GangLifecycle("job-1", replicas, max_retries=max_retries, timeout_seconds=timeout, parent=parent)
    gang.begin(now=100.0)
    for rank in range(replicas):
        gang.attempt_started(rank)
    return gang


# (max_retries, attempts already made, exit code, why) -> decision, replica state, job message
ATTEMPT_OUTCOMES = [
    pytest.param(0, 1, 0, None, Decision.SUCCEEDED, JobState.SUCCEEDED, None, id="exit 0 succeeds"),
    pytest.param(2, 3, 0, None, Decision.SUCCEEDED, JobState.SUCCEEDED, None, id="exit 0 on the last attempt"),
    pytest.param(1, 1, 3, None, Decision.RETRY, JobState.RUNNING, None, id="failure with a retry left"),
    pytest.param(2, 2, 9, None, Decision.RETRY, JobState.RUNNING, None, id="second failure, one retry left"),
    pytest.param(
        0,
        1,
        3,
        None,
        Decision.FAIL,
        JobState.FAILED,
        "replica 0 failed: exit code 3 on attempt 1 of 1; stopped the other replicas",
        id="no retries",
    ),
    pytest.param(
        1,
        2,
        137,
        None,
        Decision.FAIL,
        JobState.FAILED,
        "replica 0 failed: exit code 137 on attempt 2 of 2; stopped the other replicas",
        id="retries exhausted",
    ),
    pytest.param(
        0,
        1,
        None,
        "its Ray task ended (WorkerCrashedError)",
        Decision.FAIL,
        JobState.FAILED,
        "replica 0 failed: its Ray task ended (WorkerCrashedError) on attempt 1 of 1; stopped the other replicas",
        id="no exit code: the transport says why",
    ),
    pytest.param(1, 1, None, None, Decision.RETRY, JobState.RUNNING, None, id="no exit code is a failure, retried"),
]


@pytest.mark.parametrize("max_retries,attempts,code,why,decision,state,message", ATTEMPT_OUTCOMES)
def test_attempt_outcome_decides(max_retries, attempts, code, why, decision, state, message) -> None:
    gang = started(2, max_retries=max_retries)
    for _ in range(attempts - 1):  # earlier attempts failed and were retried
        assert gang.attempt_ended(0, 1).decision is Decision.RETRY
        gang.attempt_started(0)
    verdict = gang.attempt_ended(0, code, why)
    assert verdict.decision is decision
    replica = gang.replicas[0]
    assert replica.attempts == attempts and replica.exit_codes[-1] == code and replica.finished_at
    if decision is Decision.RETRY:
        assert verdict.note and verdict.note.endswith("; retrying") and verdict.outcome is None
        gang.attempt_started(0)
    assert replica.state == state
    if decision is Decision.FAIL:
        # A failed replica ends the job; the others, still running, are recorded as cancelled.
        assert verdict.outcome == Outcome(JobState.FAILED, message, JobState.CANCELLED)
    else:
        assert verdict.outcome is None
    assert gang.replicas[1].state == JobState.RUNNING


def test_retry_note_names_rank_attempt_and_cause() -> None:
    gang = started(2, max_retries=1)
    assert gang.attempt_ended(1, 3).note == "rank 1 attempt 1 failed (exit code 3); retrying"


def test_job_succeeds_only_when_every_replica_has() -> None:
    gang = started(3)
    gang.attempt_ended(0, 0)
    gang.attempt_ended(2, 0)
    assert gang.check(now=101.0) is None
    gang.attempt_ended(1, 0)
    assert gang.check(now=101.0) == lifecycle.SUCCEEDED


@pytest.mark.parametrize(
    "timeout,now,expired",
    [
        (None, 1e9, False),  # no deadline
        (30.0, 129.9, False),  # the deadline counts from begin (now=100)
        (30.0, 130.0, True),
        (0.5, 100.5, True),
    ],
)
def test_deadline(timeout, now, expired) -> None:
    gang = started(1, timeout=timeout)
    outcome = gang.check(now)
    if not expired:
        assert outcome is None
        return
    assert outcome == Outcome(
        JobState.FAILED, f"timed out after {timeout:g}s (timeout_seconds); stopped every replica", JobState.FAILED
    )


def test_success_wins_over_a_deadline_reached_at_the_same_moment() -> None:
    gang = started(1, timeout=10.0)
    gang.attempt_ended(0, 0)
    assert gang.check(now=500.0) == lifecycle.SUCCEEDED


def test_deadline_starts_when_the_gang_is_placed_not_when_it_is_made() -> None:
    gang = GangLifecycle("job-1", 1, timeout_seconds=5.0)
    assert gang.check(now=1e9) is None  # not begun: no deadline yet
    gang.begin(now=1000.0)
    assert gang.check(now=1004.0) is None
    assert gang.check(now=1005.0) is not None


def test_parent_watch_cadence() -> None:
    orphan = started(1)
    assert not orphan.parent_due(now=100.0)  # no parent: never
    child = started(1, parent="parent-1")
    assert child.parent_due(now=100.0)
    assert not child.parent_due(now=100.0 + PARENT_CHECK_SECONDS / 2)
    assert child.parent_due(now=100.0 + PARENT_CHECK_SECONDS)
    assert lifecycle.parent_ended_reason("parent-1", "succeeded") == "parent job parent-1 ended (succeeded)"


@pytest.mark.parametrize(
    "outcome,survivor_code,survivor_state",
    [
        (Outcome(JobState.FAILED, "replica 0 failed", JobState.CANCELLED), 0, JobState.CANCELLED),
        (Outcome(JobState.FAILED, "replica 0 failed", JobState.CANCELLED), 1, JobState.CANCELLED),
        (lifecycle.cancelled("cancelled by someone"), 143, JobState.CANCELLED),
        (lifecycle.failed("driver error"), 0, JobState.FAILED),
    ],
)
def test_attempts_ending_while_stopping_are_recorded_never_retried(outcome, survivor_code, survivor_state) -> None:
    gang = started(2, max_retries=5)
    gang.stop(outcome)
    verdict = gang.attempt_ended(1, survivor_code)
    assert verdict.decision is Decision.RECORDED and verdict.outcome is None
    assert gang.replicas[1].state == survivor_state and gang.replicas[1].attempts == 1


def test_finish_marks_unfinished_replicas_and_ends_the_job() -> None:
    gang = started(3)
    gang.attempt_ended(0, 0)
    verdict = gang.attempt_ended(1, 2)
    assert verdict.outcome is not None
    gang.finish(verdict.outcome)
    states = [r.state for r in gang.replicas]
    assert states == [JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED]
    assert all(r.finished_at for r in gang.replicas)
    record = gang.record()
    assert record["state"] == "failed" and record["message"].startswith("replica 1 failed")
    assert record["finished_at"] and [r["state"] for r in record["replicas"]] == ["succeeded", "failed", "cancelled"]
    assert gang.children_reason() == "parent job job-1 ended (failed)"


def test_finish_marks_pending_replicas_too() -> None:
    gang = GangLifecycle("job-1", 2)
    gang.finish(lifecycle.cancelled("cancelled before it started"))
    assert [r.state for r in gang.replicas] == [JobState.CANCELLED, JobState.CANCELLED]
    assert gang.record()["state"] == "cancelled" and gang.record()["started_at"] is None


def test_the_first_stop_wins() -> None:
    gang = started(1)
    first = lifecycle.cancelled("first")
    gang.stop(first)
    gang.stop(lifecycle.failed("later"))
    assert gang.stopping == first


def test_messages() -> None:
    record = {"user": "ada", "host": "box", "pid": 7, "at": "2026-12-01T00:00:00.000+00:00", "reason": "because"}
    assert lifecycle.cancel_message(record) == "cancelled by ada@box (pid 7) at 2026-12-01T00:00:00.000+00:00: because"
    assert lifecycle.cancel_message({**record, "reason": None}).endswith("+00:00")
    assert lifecycle.outcome_line(lifecycle.SUCCEEDED) == "job succeeded"
    assert lifecycle.outcome_line(lifecycle.cancelled("why")) == "job cancelled: why"
    assert lifecycle.parent_cancelled_reason("p", None) == "parent job p was cancelled"
    assert lifecycle.parent_cancelled_reason("p", "enough") == "parent job p was cancelled: enough"
    request = lifecycle.cancel_request("enough")
    assert request["reason"] == "enough" and {"user", "host", "pid", "at"} <= set(request)


def test_replica_record_carries_the_transports_columns() -> None:
    gang = started(1)
    gang.replicas[0].details.update(pid=1234, node_ip="10.0.0.1")
    row = gang.record()["replicas"][0]
    assert row["pid"] == 1234 and row["node_ip"] == "10.0.0.1" and row["attempts"] == 1 and row["exit_code"] is None
