"""Faults of the machinery are named and classed operational, with where they happened and the next
step: a full disk, storage that turned read-only, a Slurm node failure, a scheduler that cancelled
the job from outside rlaunch (scancel, a time limit) or lost it (a slurmctld restart), a lost
supervisor, a replica killed for memory, a preemption.

The messages are the ones the backends and the host write (`cluster/local/backend.py`,
`cluster/slurm/backend.py`, `cluster/gang/supervisor.py`, `storage.disk_full_message`), as the host
puts them after "child job <id> reached <state>: ".
"""

from __future__ import annotations

import errno

import pytest

from rlaunch import storage
from rlaunch.launch_config.failures import (
    LOST_BY_SCHEDULER,
    NEXT_STEPS,
    OPERATIONAL,
    READ_ONLY,
    UNCLASSIFIED,
    FailureClass,
    classify,
)

CHILD = "child job marker-rl-7 reached failed: "


@pytest.mark.parametrize(
    ("failure", "cause", "where"),
    [
        (
            CHILD + "the Slurm job ended (NODE_FAIL, reason NodeDown) on node(s) node-2 before its driver "
            "recorded an outcome (see /s/9/supervisor.log)",
            "node failure",
            "node-2",
        ),
        (
            CHILD + "the Slurm job ended (BOOT_FAIL, reason None) on node(s) gpu[3-4] before its driver recorded",
            "node failure",
            "gpu[3-4]",
        ),
        (
            "child job 12 reached cancelled: cancelled by slurm@node-0 (pid 41) at 2026-12-04T17:00:00Z: "
            "supervisor received SIGTERM",
            "cancelled by the scheduler",
            "node-0",
        ),
        (
            CHILD + "the Slurm job ended (CANCELLED, reason None) on node(s) node-1 before its driver recorded an "
            "outcome (see /s/9/supervisor.log)",
            "cancelled by the scheduler",
            "node-1",
        ),
        (
            CHILD + "supervisor lost on host-a: it exited without recording an outcome (see /j/supervisor.log); "
            "stopped the replicas it left",
            "lost supervisor",
            "host-a",
        ),
        (
            CHILD + "the Slurm job ended (OUT_OF_MEMORY, reason OutOfMemory) on node(s) node-3 before its driver "
            "recorded an outcome",
            "killed for memory",
            "node-3",
        ),
        (
            CHILD + "the Slurm job ended (slurmctld no longer knows it) on node(s) node-5 before its driver "
            "recorded an outcome (see /s/9/supervisor.log)",
            LOST_BY_SCHEDULER,
            "node-5",
        ),
        (
            CHILD + "the Slurm job ended (PREEMPTED, reason None) on node(s) gpu-4 before its driver recorded",
            "preempted",
            "gpu-4",
        ),
        ("RayletDied: node n-3 was preempted by the cloud provider", "preempted", "n-3"),
        ("pod trainer-0 preempted on node gke-pool-7: evicted for a higher priority pod", "preempted", "gke-pool-7"),
    ],
)
def test_a_scheduler_fault_is_operational_with_its_node_and_next_step(failure: str, cause: str, where: str) -> None:
    found = classify(failure)
    assert (found.kind, found.cause, found.where) == (OPERATIONAL, cause, where), found
    assert "--retry" in found.advice
    assert found.where in found.summary() and found.advice in found.summary()
    assert FailureClass.from_json(found.to_json()) == found  # the record keeps where it happened


def test_a_cancel_by_a_person_is_not_a_scheduler_fault() -> None:
    found = classify(
        "child job 12 reached cancelled: cancelled by ana@laptop (pid 7) at 2026-12-04T17:00:00Z: wrong data"
    )
    assert found.kind == UNCLASSIFIED, found


def test_a_full_disk_names_the_file_it_could_not_write_and_the_next_step() -> None:
    message = storage.disk_full_message(OSError(errno.EDQUOT, "Disk quota exceeded", "/scratch/run/attempts/a.json"))
    found = classify("child job 3 reached failed: exit code 1", [f"[rank 0] {message}", "done"])
    assert (found.kind, found.cause, found.where) == (OPERATIONAL, "disk full", "/scratch/run/attempts/a.json")
    assert "EDQUOT" in found.evidence and "free space" in found.advice


def test_a_bare_enospc_names_no_path_rather_than_a_wrong_one() -> None:
    found = classify(None, ["OSError: [Errno 28] No space left on device"])
    assert (found.cause, found.where) == ("disk full", None)


def test_where_is_only_read_from_the_cause_that_names_it() -> None:
    found = classify(None, ["RuntimeError: NCCL error on node node-9 writing '/tmp/x'"])
    assert found.cause == "collective-communication failure" and found.where is None


def test_a_job_slurmctld_forgot_is_lost_by_the_scheduler_even_where_no_node_is_named() -> None:
    found = classify(
        CHILD + "the Slurm job ended (slurmctld no longer knows it) before its driver recorded an outcome "
        "(see /s/9/supervisor.log)"
    )
    assert (found.kind, found.cause, found.where) == (OPERATIONAL, LOST_BY_SCHEDULER, None)
    assert found.advice == NEXT_STEPS[LOST_BY_SCHEDULER] and "scontrol ping" in found.advice
    assert '--retry "job lost by the scheduler"' in found.advice
    # a slurmctld that is slow to answer has not lost the job
    slow = classify("squeue did not answer within 30s; is slurmctld up (`scontrol ping`), and retry")
    assert slow.cause != LOST_BY_SCHEDULER, slow


def test_a_preemptible_node_is_not_a_preemption() -> None:
    """The whole word (preempt, preempted, preemption), not a prefix of another."""
    assert classify("scheduling on a preemptible node pool").kind == UNCLASSIFIED
    assert classify("job preemption notice received").cause == "preempted"


@pytest.mark.parametrize(
    "line",
    [
        "OSError: [Errno 30] Read-only file system: '/p/x'",
        "rank 0: EROFS writing '/p/x'",
    ],
)
def test_storage_that_turned_read_only_is_operational_with_its_path_and_next_step(line: str) -> None:
    found = classify("child job 3 reached failed: exit code 1", [line])
    assert (found.kind, found.cause, found.where) == (OPERATIONAL, READ_ONLY, "/p/x"), found
    assert found.advice == NEXT_STEPS[READ_ONLY] and '--retry "read-only storage"' in found.advice
    assert "/p/x" in found.summary()


def test_errno_30_is_the_whole_number() -> None:
    assert classify("OSError: [Errno 301] something else: '/p/x'").kind == UNCLASSIFIED


@pytest.mark.parametrize(
    ("line", "roots", "where"),
    [
        ("PermissionError: [Errno 13] Permission denied: '/scratch/run/attempts/a.json'", ["/scratch/run"], "/scratch/run/attempts/a.json"),
        ("PermissionError: [Errno 13] Permission denied: '/scratch/run'", ["/scratch/run/"], "/scratch/run"),
        ("OSError: [Errno 1] Operation not permitted: '/scratch/run/x'", ["/elsewhere", "/scratch/run"], "/scratch/run/x"),
    ],
)  # fmt: skip
def test_a_permission_error_on_the_runs_storage_is_read_only_storage(line: str, roots: list[str], where: str) -> None:
    found = classify(None, [line], storage_roots=roots)
    assert (found.kind, found.cause, found.where) == (OPERATIONAL, READ_ONLY, where), found


@pytest.mark.parametrize(
    ("line", "roots"),
    [
        ("PermissionError: [Errno 13] Permission denied: '/scratch/running/a.json'", ["/scratch/run"]),  # a prefix
        ("PermissionError: [Errno 13] Permission denied: '/home/ana/model/config.json'", ["/scratch/run"]),
        ("PermissionError: [Errno 13] Permission denied: '/scratch/run/a.json'", []),  # no storage named
        ("PermissionError: [Errno 13] Permission denied: '/scratch/run/a.json'", ["/"]),  # not the whole disk
        ("PermissionError: [Errno 13] Permission denied", ["/scratch/run"]),  # no path
        ("OSError: [Errno 130] Owner died: '/scratch/run/a.json'", ["/scratch/run"]),  # not errno 13 or 1
    ],
)  # fmt: skip
def test_a_permission_error_elsewhere_is_not_the_machinerys(line: str, roots: list[str]) -> None:
    """A path outside the run's storage (a model, a venv) may be the inputs': left to a person."""
    assert classify(None, [line], storage_roots=roots).kind == UNCLASSIFIED
