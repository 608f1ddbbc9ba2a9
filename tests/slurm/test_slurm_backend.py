"""The slurm backend against the tier's real Slurm: gangs across both nodes, logs, the pending
reason, cancel (queued and running, cascading to children), retries, and the queue preflight."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rlaunch.cluster.protocol import CapacityError, JobSpec, JobState, Resources
from tests.polling import py, wait_for
from tests.slurm.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.slurm
WAIT = 120.0  # a job's whole life here; every wait below is bounded by it


@pytest.fixture
def backend(slurm_env: SlurmCluster) -> Iterator[object]:
    from rlaunch.cluster.slurm.backend import SlurmBackend

    backend = SlurmBackend(kill_grace=2.0)
    yield backend
    left = [s.job_id for s in backend.list_jobs() if not s.state.terminal]
    for job_id in left:
        backend.cancel(job_id, reason="test teardown")
    assert not left, f"jobs left running after the test (cancelled now): {left}"


def test_a_gang_runs_one_replica_per_node_and_its_log_has_both(backend, slurm_env: SlurmCluster) -> None:
    job_id = backend.submit(
        JobSpec(
            name="hello",
            argv=py("import os; print('rank', os.environ['RLAUNCH_REPLICA_RANK'], 'on', os.environ['SLURMD_NODENAME'], os.environ['RLAUNCH_WORLD_SIZE'])"),
            replicas=2,
        )
    )
    assert job_id in slurm_env.command("squeue", "-h", "-t", "all", "-o", "%i").split()
    status = backend.wait(job_id, timeout=WAIT)
    assert status.state is JobState.SUCCEEDED, status
    assert [r.state for r in status.replicas] == [JobState.SUCCEEDED] * 2
    lines = list(backend.logs(job_id))
    assert "[rank 0] rank 0 on n1 2" in lines and "[rank 1] rank 1 on n2 2" in lines, lines


def test_a_failing_replica_is_retried_once_then_the_job_fails_with_its_reason(backend) -> None:
    job_id = backend.submit(
        JobSpec(
            name="flaky",
            argv=py("import os, sys; print('attempt of', os.environ['RLAUNCH_REPLICA_RANK']); sys.exit(3 if os.environ['RLAUNCH_REPLICA_RANK'] == '1' else 0)"),
            replicas=2,
            max_retries=1,
        )
    )
    status = backend.wait(job_id, timeout=WAIT)
    assert status.state is JobState.FAILED
    assert status.message.startswith("replica 1 failed: exit code 3 on attempt 2 of 2"), status.message
    assert status.replicas[1].attempts == 2 and status.replicas[1].exit_code == 3
    assert [line for line in backend.logs(job_id, replica=1)].count("attempt of 1") == 2
