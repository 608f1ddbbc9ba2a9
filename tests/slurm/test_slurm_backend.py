"""The slurm backend against the tier's real Slurm: gangs across both nodes, logs, the pending
reason, cancel (queued and running, cascading to children), retries, and the queue check."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlaunch.cluster.protocol import CapacityError, JobSpec, JobState, Resources
from tests.slurm.slurm_cluster import SlurmCluster
from tests.support.polling import py, wait_for

pytestmark = pytest.mark.slurm
WAIT = 120.0  # a job's whole life here; every wait below is bounded by it


def submit_pair(backend, name: str, code: str, **fields: object) -> str:
    """Submit `code` as a job of two replicas (one on each node); its id."""
    return backend.submit(JobSpec(name=name, argv=py(code), replicas=2, **fields))


def test_a_gang_runs_one_replica_per_node_and_its_log_has_both(backend, slurm_env: SlurmCluster) -> None:
    job_id = submit_pair(
        backend,
        "hello",
        "import os; e = os.environ; print('rank', e['RLAUNCH_REPLICA_RANK'], 'of', e['RLAUNCH_WORLD_SIZE'], 'on', e['SLURMD_NODENAME'], e['RLAUNCH_NODE_IP'], 'meets at', e['RLAUNCH_RENDEZVOUS'].split(':')[0])",
    )
    assert job_id in slurm_env.command("squeue", "-h", "-t", "all", "-o", "%i").split()
    status = backend.wait(job_id, timeout=WAIT)
    assert status.state is JobState.SUCCEEDED, status
    assert [r.state for r in status.replicas] == [JobState.SUCCEEDED] * 2
    lines = list(backend.logs(job_id))
    assert "[rank 0] rank 0 of 2 on n1 127.0.0.1 meets at 127.0.0.1" in lines, lines
    assert "[rank 1] rank 1 of 2 on n2 127.0.0.2 meets at 127.0.0.1" in lines, lines


def test_each_replica_holds_its_nodes_gpus_and_cpus(backend) -> None:
    job_id = submit_pair(
        backend,
        "gpus",
        "import os; e = os.environ; print(e['SLURMD_NODENAME'], e['CUDA_VISIBLE_DEVICES'], e['SLURM_CPUS_PER_TASK'])",
        resources=Resources(cpu=2, accelerators=2, accelerator_type="H100"),
    )
    assert backend.wait(job_id, timeout=WAIT).state is JobState.SUCCEEDED
    assert sorted(backend.logs(job_id)) == ["[rank 0] n1 0,1 2", "[rank 1] n2 0,1 2"]


def test_a_failing_replica_is_retried_once_then_the_job_fails_with_its_reason(backend) -> None:
    job_id = submit_pair(
        backend,
        "flaky",
        "import os, sys; print('attempt of', os.environ['RLAUNCH_REPLICA_RANK']); sys.exit(3 if os.environ['RLAUNCH_REPLICA_RANK'] == '1' else 0)",
        max_retries=1,
    )
    status = backend.wait(job_id, timeout=WAIT)
    assert status.state is JobState.FAILED
    assert status.message.startswith("replica 1 failed: exit code 3 on attempt 2 of 2"), status.message
    assert status.replicas[1].attempts == 2 and status.replicas[1].exit_code == 3
    assert [line for line in backend.logs(job_id, replica=1)].count("attempt of 1") == 2


def _sleeper(name: str, **fields: object) -> JobSpec:
    return JobSpec(name=name, argv=py("import time; print('up', flush=True); time.sleep(300)"), **fields)


def test_a_queued_job_shows_slurms_reason_and_cancelling_it_drops_it_from_the_queue(
    backend, slurm_env: SlurmCluster
) -> None:
    running = backend.submit(_sleeper("whole-cluster", replicas=2, resources=Resources(cpu=4)))
    queued = backend.submit(_sleeper("behind", resources=Resources(cpu=4)))
    status = wait_for(
        lambda: (s := backend.status(queued)).message and "Resources" in s.message and s, WAIT, "Slurm's pending reason"
    )
    assert status.state is JobState.PENDING and status.message.startswith("pending in Slurm: "), status
    cancelled = backend.cancel(queued, reason="not needed")
    assert cancelled.state is JobState.CANCELLED and "not needed" in cancelled.message
    assert queued not in slurm_env.command("squeue", "-h", "-o", "%i").split()
    wait_for(lambda: backend.status(running).state is JobState.RUNNING, WAIT, "the first job to run")
    done = backend.cancel(running, reason="test over")
    assert done.state is JobState.CANCELLED and [r.state for r in done.replicas] == [JobState.CANCELLED] * 2
    wait_for(
        lambda: running not in slurm_env.command("squeue", "-h", "-o", "%i").split(), 30, "the job to leave squeue"
    )


def test_cancelling_a_parent_cancels_the_child_it_submitted_with_sbatch(backend, slurm_env: SlurmCluster) -> None:
    parent = backend.submit(
        JobSpec(
            name="parent",
            argv=py(
                """
                import sys, time
                from rlaunch.cluster.protocol import JobSpec, backend_from_env
                child = backend_from_env().submit_child(JobSpec(name="child", argv=(sys.executable, "-c", "import time; time.sleep(300)")))
                print("child", child, flush=True)
                time.sleep(300)
                """
            ),
        )
    )
    child = wait_for(lambda: backend.status(parent).children, WAIT, "the parent's child")[0]
    wait_for(lambda: backend.status(child).state is JobState.RUNNING, WAIT, "the child to run")
    backend.cancel(parent, reason="stop the tree")
    status = backend.status(child)
    assert status.state is JobState.CANCELLED and f"parent job {parent} was cancelled" in status.message
    wait_for(
        lambda: not {parent, child} & set(slurm_env.command("squeue", "-h", "-o", "%i").split()),
        30,
        "both to leave squeue",
    )


@pytest.mark.parametrize(
    ("fields", "placement", "words"),
    [
        ({"replicas": 3}, {}, "needs 3 node(s) with 1 CPU(s) each but partition debug has 2 such node(s)"),
        (
            {"resources": Resources(accelerators=4, accelerator_type="H100")},
            {},
            "needs 4 x gpu per node but no node of partition debug has more than 2",
        ),
        ({}, {"partition": "nope"}, "partition 'nope' does not exist on this Slurm cluster"),
        (
            {},
            {"partition": "small", "account": "chem", "time_limit_minutes": 10},
            "account chem may not use partition small",
        ),
        (
            {},
            {"partition": "small", "account": "physics", "time_limit_minutes": 10},
            "time limit 10 min exceeds partition small's MaxTime of 5 min",
        ),
        ({"resources": Resources(accelerators=1)}, {"gpu_gres": "gpu:a100"}, "needs 1 x gpu:a100 per node"),
    ],
)
def test_what_slurm_could_never_start_is_refused_before_submission(
    slurm_env: SlurmCluster, fields: dict, placement: dict, words: str
) -> None:
    from rlaunch.cluster.slurm.backend import SlurmBackend

    backend = SlurmBackend(**placement)
    before = slurm_env.command("squeue", "-h", "-t", "all", "-o", "%i").split()
    with pytest.raises(CapacityError) as refused:
        backend.submit(JobSpec(name="too-big", argv=py("pass"), **fields))
    assert words in str(refused.value)
    assert slurm_env.command("squeue", "-h", "-t", "all", "-o", "%i").split() == before


def test_rlaunch_jobs_lists_the_jobs_squeue_shows(backend, slurm_env: SlurmCluster) -> None:
    import json
    import subprocess
    import sys

    running = backend.submit(_sleeper("lister", replicas=2, resources=Resources(cpu=3)))
    queued = backend.submit(_sleeper("lister-queued", resources=Resources(cpu=3)))
    wait_for(lambda: backend.status(running).state is JobState.RUNNING, WAIT, "the first job to run")
    squeue = dict(line.split() for line in slurm_env.command("squeue", "-h", "-o", "%i %T").splitlines())
    listed = subprocess.run(
        [sys.executable, "-m", "rlaunch", "jobs", "--backend", "slurm", "list", "--json"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    live = {s["job_id"]: s["state"] for s in json.loads(listed.stdout) if s["state"] in ("pending", "running")}
    assert (
        live == {job_id: state.lower() for job_id, state in squeue.items()} == {running: "running", queued: "pending"}
    )
    for job_id in (queued, running):
        backend.cancel(job_id)


def test_scancel_of_a_running_parent_is_recorded_as_a_cancel_and_takes_its_child_down(
    backend, slurm_env: SlurmCluster
) -> None:
    parent = backend.submit(
        JobSpec(
            name="scancelled",
            argv=py(
                """
                import sys, time
                from rlaunch.cluster.protocol import JobSpec, backend_from_env
                backend_from_env().submit_child(JobSpec(name="orphan", argv=(sys.executable, "-c", "import time; time.sleep(300)")))
                time.sleep(300)
                """
            ),
        )
    )
    child = wait_for(lambda: backend.status(parent).children, WAIT, "the parent's child")[0]
    wait_for(lambda: backend.status(child).state is JobState.RUNNING, WAIT, "the child to run")
    slurm_env.command("scancel", parent)
    status = backend.wait(parent, timeout=WAIT)
    assert status.state is JobState.CANCELLED and "supervisor received SIGTERM" in status.message, status
    child_status = backend.wait(child, timeout=WAIT)
    assert child_status.state is JobState.CANCELLED and f"parent job {parent}" in child_status.message


def test_a_job_whose_driver_does_not_obey_the_cancel_is_ended_by_slurm(backend, slurm_env: SlurmCluster) -> None:
    import os
    import signal

    job_id = backend.submit(_sleeper("stuck"))
    wait_for(lambda: backend.status(job_id).state is JobState.RUNNING, WAIT, "the job to run")
    wanted = [b"-m", b"rlaunch.cluster.slurm.job_driver", str(backend.root).encode()]
    (driver,) = [pid for pid in _pids() if _cmdline(pid)[1:4] == wanted]
    os.kill(driver, signal.SIGSTOP)  # it can no longer see the cancel request
    status = backend.cancel(job_id, reason="stuck driver")  # scancel's SIGCONT + SIGTERM wake it up
    assert status.state is JobState.CANCELLED and "stuck driver" in status.message, status
    wait_for(lambda: job_id not in slurm_env.command("squeue", "-h", "-o", "%i").split(), 30, "the job to leave squeue")


def _pids() -> list[int]:
    import os

    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _cmdline(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:  # it exited meanwhile
        return []
