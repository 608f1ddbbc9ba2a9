"""Faults of the machinery are named and classed operational, with where they happened and the next
step: a full disk, a Slurm node failure, a scheduler that cancelled the job from outside rlaunch
(a slurmctld restart, scancel, a time limit), a lost supervisor, a replica killed for memory.

The messages are the ones the backends and the host write (`cluster/local/backend.py`,
`cluster/slurm/backend.py`, `cluster/gang/supervisor.py`, `storage.disk_full_message`), as the host
puts them after "child job <id> reached <state>: ".
"""

from __future__ import annotations

import errno

import pytest

from rlaunch import storage
from rlaunch.launch_config.failures import OPERATIONAL, UNCLASSIFIED, FailureClass, classify

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
