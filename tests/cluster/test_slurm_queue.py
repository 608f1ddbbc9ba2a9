"""The slurm backend's queue check and cancel path against a scripted Slurm, in process: what it
asks squeue, sacct and scancel (the exact commands), how it reads their answers, how often it asks
slurmctld, and what a pending, running, ended or forgotten job becomes. The Slurm tier
(tests/slurm) runs the same paths against a real slurmctld.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from rlaunch.cluster import base
from rlaunch.cluster.gang.state import JobDir
from rlaunch.cluster.protocol import JobState
from rlaunch.cluster.slurm import backend as slurm_backend
from rlaunch.cluster.slurm import commands
from rlaunch.cluster.slurm.backend import SlurmBackend
from rlaunch.cluster.slurm.commands import ENDED, QueueEntry, SlurmError
from rlaunch.launch_config.failures import LOST_BY_SCHEDULER, OPERATIONAL, classify
from tests.support.scripted_slurm import FakeSlurm, fresh_answers, pending_job, scripted


@pytest.fixture
def slurm(monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    return scripted(monkeypatch)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The backend's monotonic clock, set by the test (each look at the queue reads it)."""
    now = [100.0]
    monkeypatch.setattr(slurm_backend, "time", SimpleNamespace(monotonic=lambda: now[0]))
    return now


# -- commands: what is asked and how the answers are read ------------------------------------


def test_the_queue_is_asked_first_with_every_state(slurm: FakeSlurm) -> None:
    slurm.queue["77"] = ("PENDING", "Priority")
    assert commands.queue_entry("77") == QueueEntry("PENDING", "Priority")
    assert slurm.calls == [["squeue", "-h", "-t", "all", "-j", "77", "-o", "%T|%r"]]
    assert slurm.timeouts == [("squeue", commands.COMMAND_TIMEOUT)] and slurm.shielded == []  # a plain question


def test_a_signalled_drivers_question_is_shielded_and_bounded_through_to_accounting(slurm: FakeSlurm) -> None:
    assert slurm.accounting is not None
    slurm.accounting["77"] = ("NODE_FAIL", "NodeDown")
    assert commands.queue_entry("77", timeout=3.0, shielded=True) == QueueEntry("NODE_FAIL", "NodeDown")
    assert slurm.shielded == ["squeue", "sacct"] and slurm.timeouts[0] == ("squeue", 3.0)
    assert commands.accounting_entry("77") == QueueEntry("NODE_FAIL", "NodeDown") and slurm.shielded[2:] == []


def test_a_job_the_queue_purged_is_read_from_accounting(slurm: FakeSlurm) -> None:
    assert slurm.accounting is not None
    slurm.accounting["77"] = ("NODE_FAIL", "NodeDown")
    assert commands.queue_entry("77") == QueueEntry("NODE_FAIL", "NodeDown")
    assert slurm.calls[1] == ["sacct", "-n", "-X", "-P", "-j", "77", "-o", "State,Reason"]
    slurm.accounting = None  # no slurmdbd: nobody knows the job
    assert commands.queue_entry("77") is None and commands.accounting_entry("77") is None


def test_an_empty_queue_answer_falls_back_to_accounting(slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[list[str]] = []
    monkeypatch.setattr(commands, "run", lambda argv, **_: asked.append(argv) or ("" if argv[0] == "squeue" else "X|y"))
    assert commands.queue_entry("5") == QueueEntry("X", "y")
    assert [a[0] for a in asked] == ["squeue", "sacct"]


def test_a_queue_that_does_not_answer_is_an_error_not_an_unknown_job(slurm: FakeSlurm) -> None:
    slurm.down = True
    with pytest.raises(SlurmError, match="did not answer"):
        commands.queue_entry("77")
    assert len(slurm.calls) == 1  # accounting is not asked in its place


@pytest.mark.parametrize(
    ("out", "expected"),
    [
        ("RUNNING|waiting|for a node\n", QueueEntry("RUNNING", "waiting|for a node")),  # the reason whole
        ("\nno row here\nPENDING|Resources\n", QueueEntry("PENDING", "Resources")),
        ("  |Resources\n", None),  # no state
        ("PENDING|\n", QueueEntry("PENDING", "")),
    ],
)
def test_a_row_is_split_at_its_first_bar_and_needs_a_state(out: str, expected: QueueEntry | None) -> None:
    assert commands.first_entry(out) == expected


@pytest.mark.parametrize("state", sorted(ENDED))
def test_every_ended_state_ends_the_job(state: str) -> None:
    assert QueueEntry(state, "None").ended


@pytest.mark.parametrize(
    "state", ["PENDING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "cancelled"]
)
def test_a_job_still_in_the_queue_has_not_ended(state: str) -> None:
    assert not QueueEntry(state, "None").ended


def test_the_nodes_come_from_accounting_else_the_queue(slurm: FakeSlurm) -> None:
    slurm.nodes["7"] = "  node-[1-2]  "
    assert commands.job_nodes("7") == "node-[1-2]"
    assert slurm.calls == [["sacct", "-n", "-X", "-P", "-j", "7", "-o", "NodeList"]]
    for nothing in ("", "None assigned", "(null)"):
        slurm.nodes["7"], slurm.squeue_nodes["7"] = nothing, " node-3 "
        slurm.calls.clear()
        assert commands.job_nodes("7") == "node-3", nothing
        assert slurm.calls[1] == ["squeue", "-h", "-t", "all", "-j", "7", "-o", "%N"]
    slurm.squeue_nodes["7"] = "(null)"
    assert commands.job_nodes("7") is None
    slurm.accounting, slurm.squeue_nodes["7"] = None, "node-4\nnode-5"
    assert commands.job_nodes("7") == "node-4"  # accounting fails: the queue's first line
    slurm.down = True
    assert commands.job_nodes("7") is None


def test_queued_ids_are_every_id_squeue_lists(slurm: FakeSlurm) -> None:
    slurm.queue.update({"12": ("PENDING", "None"), "13_1": ("RUNNING", "None")})
    assert commands.queued_ids() == ["12", "13_1"]
    assert slurm.calls == [["squeue", "-h", "-o", "%i"]]


# -- the backend: status, the queue's cache, a job Slurm ended, cancel -------------------------


def test_a_pending_job_says_why_slurm_holds_it(tmp_path: Path, slurm: FakeSlurm, clock: list[float]) -> None:
    backend = SlurmBackend(root=tmp_path)
    pending_job(backend, "77")
    slurm.queue["77"] = ("PENDING", "Resources")
    status = backend.status("77")
    assert (status.state, status.message) == (JobState.PENDING, "pending in Slurm: Resources")
    clock[0] += 2
    slurm.queue["77"] = ("PENDING", "None")
    assert backend.status("77").message == "pending in Slurm: not yet looked at by the scheduler"
    clock[0] += 2
    slurm.queue["77"] = ("RUNNING", "None")  # its driver has not yet recorded the start
    status = backend.status("77")
    assert (status.state, status.message) == (JobState.PENDING, None)


def test_a_message_already_recorded_is_not_replaced(tmp_path: Path, slurm: FakeSlurm, clock: list[float]) -> None:
    backend = SlurmBackend(root=tmp_path)
    job = pending_job(backend, "77")
    job.write_state({**job.read_state(), "message": "staging"})
    slurm.queue["77"] = ("PENDING", "Resources")
    assert backend.status("77").message == "staging"


def test_slurmctld_is_asked_at_most_once_a_second_per_job(tmp_path: Path, slurm: FakeSlurm, clock: list[float]) -> None:
    backend = SlurmBackend(root=tmp_path)
    slurm.queue.update({"1": ("PENDING", "Resources"), "2": ("RUNNING", "None")})
    asked = lambda: sum(1 for c in slurm.calls if c[0] == "squeue")  # noqa: E731
    assert backend._entry("1") == QueueEntry("PENDING", "Resources") and asked() == 1
    clock[0] += 1.0  # exactly the limit: still the answer it has
    slurm.queue["1"] = ("RUNNING", "None")
    assert backend._entry("1") == QueueEntry("PENDING", "Resources") and asked() == 1
    assert backend._entry("2") == QueueEntry("RUNNING", "None") and asked() == 2  # another job: asked
    clock[0] += 0.01
    assert backend._entry("1") == QueueEntry("RUNNING", "None") and asked() == 3
    slurm.queue.pop("1")
    slurm.accounting = None
    clock[0] += 2
    assert backend._entry("1") is None and backend._entry("1") is None  # "unknown" is kept too
    assert sum(1 for c in slurm.calls if c[0] == "sacct") == 1


@pytest.mark.parametrize(
    ("queue", "accounting", "gone"),
    [
        (("RUNNING", "None"), None, False),
        (("PENDING", "Priority"), None, False),
        (("NODE_FAIL", "NodeDown"), None, True),
        (None, ("COMPLETED", "None"), True),
        (None, None, True),  # slurmctld forgot it and nothing recorded it
    ],
)
def test_the_driver_is_gone_when_slurm_ended_or_forgot_the_job(
    tmp_path: Path,
    slurm: FakeSlurm,
    clock: list[float],
    queue: tuple[str, str] | None,
    accounting: tuple[str, str] | None,
    gone: bool,
) -> None:
    backend = SlurmBackend(root=tmp_path)
    if queue:
        slurm.queue["77"] = queue
    if accounting:
        slurm.accounting = {"77": accounting}
    assert backend._supervisor_gone(JobDir(tmp_path, "77"), {}) is gone


def test_a_queue_that_does_not_answer_takes_nothing_over(tmp_path: Path, slurm: FakeSlurm, clock: list[float]) -> None:
    slurm.down = True
    assert SlurmBackend(root=tmp_path)._supervisor_gone(JobDir(tmp_path, "77"), {}) is False


def test_a_job_slurm_ended_without_an_outcome_fails_naming_its_state_and_nodes(
    tmp_path: Path, slurm: FakeSlurm, clock: list[float]
) -> None:
    backend = SlurmBackend(root=tmp_path)
    job = pending_job(backend, "77")
    slurm.queue["77"] = ("NODE_FAIL", "NodeDown")
    slurm.nodes["77"] = "node-2"
    status = backend.status("77")
    assert status.state is JobState.FAILED
    assert status.message == (
        f"the Slurm job ended (NODE_FAIL, reason NodeDown) on node(s) node-2 before its driver recorded an outcome "
        f"(see {job.supervisor_log})"
    )
    assert ["sacct", "-n", "-X", "-P", "-j", "77", "-o", "NodeList"] in slurm.calls


DOWN_NODE = "NodeName=node-2 Arch=x86_64 State=DOWN+NOT_RESPONDING ThreadsPerCore=1 Reason=power lost [root@2026-12-05T08:59:18]"
UP_NODE = "NodeName=node-1 Arch=x86_64 State=IDLE ThreadsPerCore=1"


@pytest.mark.parametrize(
    ("queue", "expected"),
    [
        (("COMPLETING", "NodeDown"), "the Slurm job is ending (COMPLETING, reason NodeDown) on node(s) node-2"),
        (("NODE_FAIL", "NodeDown"), "the Slurm job is ending (NODE_FAIL, reason NodeDown) on node(s) node-2"),
        (("RUNNING", "None"), None),
        (("COMPLETING", "None"), None),  # scancel, a time limit: a cancel, not a node failure
        (("TIMEOUT", "TimeLimit"), None),
    ],
)
def test_a_driver_asks_slurm_whether_its_job_is_ending_for_a_failed_node(
    tmp_path: Path, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, queue: tuple[str, str], expected: str | None
) -> None:
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node-[1-2]")
    slurm.queue["77"], slurm.node_lines = queue, [UP_NODE, DOWN_NODE]
    failure = SlurmBackend(root=tmp_path).scheduler_failure("77")
    if expected is None:
        assert failure is None
        return
    assert failure == f"{expected} because a node of it failed (Slurm holds node-2 (reason: power lost) down)"
    assert ["scontrol", "show", "node", "-o", "node-[1-2]"] in slurm.calls
    assert slurm.shielded == ["squeue", "scontrol"], "Slurm's SIGTERM to the job would kill the driver's questions"
    assert slurm.timeouts == [
        ("squeue", slurm_backend.SIGNAL_QUERY_SECONDS),
        ("scontrol", slurm_backend.SIGNAL_QUERY_SECONDS),
    ]
    from rlaunch.launch_config.failures import classify

    found = classify(f"child job 77 reached failed: {failure}; supervisor received SIGTERM")
    assert (found.kind, found.cause, found.where) == ("operational", "node failure", "node-2")


@pytest.mark.parametrize("shielded", [True, False])
def test_a_shielded_question_answers_through_the_sigterm_slurm_sends_the_whole_job(shielded: bool) -> None:
    asked = ["sh", "-c", "kill -TERM $$; echo answered"]  # the signal lands while the question runs
    if shielded:
        assert commands.run(asked, shielded=True) == "answered\n"
    else:
        with pytest.raises(SlurmError, match=r"sh -c failed \(exit -15\)"):
            commands.run(asked)


def test_a_signalled_driver_whose_slurm_does_not_answer_is_cancelled_not_failed(
    tmp_path: Path, slurm: FakeSlurm
) -> None:
    slurm.down = True
    assert SlurmBackend(root=tmp_path).scheduler_failure("77") is None


def test_a_node_failure_slurm_no_longer_holds_down_names_the_jobs_nodes(
    tmp_path: Path, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node-[1-2]")
    slurm.queue["77"], slurm.node_lines = ("NODE_FAIL", "NodeDown"), [UP_NODE]  # ReturnToService brought it back
    assert SlurmBackend(root=tmp_path).scheduler_failure("77") == (
        "the Slurm job is ending (NODE_FAIL, reason NodeDown) on node(s) node-[1-2] because a node of it failed"
    )


def test_a_job_slurmctld_forgot_fails_saying_so(tmp_path: Path, slurm: FakeSlurm, clock: list[float]) -> None:
    backend = SlurmBackend(root=tmp_path)
    job = pending_job(backend, "77")
    slurm.accounting = None
    message = backend._lost_message(job)
    assert message == (
        f"the Slurm job ended (slurmctld no longer knows it) before its driver recorded an outcome "
        f"(see {job.supervisor_log})"
    )
    found = classify(f"child job 77 reached failed: {message}")  # as the host records it
    assert (found.kind, found.cause) == (OPERATIONAL, LOST_BY_SCHEDULER) and "--retry" in found.advice


def test_cancelling_a_queued_job_scancels_it_and_records_the_cancel(
    tmp_path: Path, slurm: FakeSlurm, clock: list[float], monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh_answers(monkeypatch)
    backend = SlurmBackend(root=tmp_path, kill_grace=0)
    pending_job(backend, "77")
    pending_job(backend, "78")
    slurm.queue.update({"77": ("PENDING", "Resources"), "78": ("PENDING", "Priority")})
    status = backend.cancel("77", reason="not needed")
    assert status.state is JobState.CANCELLED and "not needed" in (status.message or "")
    assert [c for c in slurm.calls if c[0] == "scancel"] == [["scancel", "77"]]  # only the one cancelled
    assert backend.status("78").state is JobState.PENDING


def test_stop_scancels_only_the_jobs_still_waiting_in_the_queue(
    tmp_path: Path, slurm: FakeSlurm, clock: list[float]
) -> None:
    backend = SlurmBackend(root=tmp_path)
    slurm.queue.update({"1": ("PENDING", "None"), "2": ("RUNNING", "None"), "3": ("PENDING", "Resources")})
    backend._stop(["1", "2", "3", "4"])
    assert [c for c in slurm.calls if c[0] == "scancel"] == [["scancel", "1", "3"]]
    slurm.calls.clear()
    backend._stop(["2"])
    assert [c for c in slurm.calls if c[0] == "scancel"] == []


def test_a_running_job_whose_driver_ignores_the_cancel_is_ended_by_slurm(
    tmp_path: Path, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    fresh_answers(monkeypatch)
    monkeypatch.setattr(base, "CANCEL_EXTRA_SECONDS", 0.0)
    backend = SlurmBackend(root=tmp_path, kill_grace=0)
    for job_id in ("77", "78"):
        pending_job(backend, job_id)
        slurm.queue[job_id] = ("RUNNING", "None")
    backend._request_cancel(["77", "78"], "stop")
    backend._await_ended(["77"])
    assert [c for c in slurm.calls if c[0] == "scancel"] == [["scancel", "77"]]
    assert backend.status("77").state is JobState.CANCELLED
    slurm.calls.clear()
    backend._await_ended(["77"])  # ended: nothing more to do
    assert [c for c in slurm.calls if c[0] == "scancel"] == []
