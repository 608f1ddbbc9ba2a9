"""A real local Ray cluster for the Ray backend tests: started once per session, stopped by PID.

`ray_cluster` starts `ray start --head --block` (4 CPUs, 8 GB of Ray memory, loopback dashboard,
free ports, its own temp dir) as one subprocess and, at the end of the session, terminates that
PID and fails if any process of the cluster (or any replica still carrying its address) is left.
The head's environment carries a marker variable that replicas must never see (they start from
an allow-list). Tests that need the cluster are skipped, with the reason, only when `ray` is not
importable. Every test gets RAY_ADDRESS (the dashboard URL) and RLAUNCH_RAY_GCS_ADDRESS, and
after each test any rlaunch job it left unfinished is cancelled and the test fails.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from ray_clusters import RAY_MISSING, RayCluster, cluster_environment, ray_importable, start_head, stop

CLUSTER_CPUS = 4
CLUSTER_MEMORY = 8 * 10**9


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    if not ray_importable():
        pytest.skip(RAY_MISSING)
    cluster = start_head(num_cpus=CLUSTER_CPUS, memory=CLUSTER_MEMORY, env=cluster_environment())
    try:
        yield cluster
    finally:
        left = stop(cluster)
        assert not left, f"processes of the test Ray cluster outlived it (killed now): {left}"


@pytest.fixture
def ray_env(ray_cluster: RayCluster, monkeypatch: pytest.MonkeyPatch) -> RayCluster:
    """RAY_ADDRESS (the dashboard) and the GCS address for this test; no developer settings."""
    for name in [k for k in os.environ if k.startswith(("RLAUNCH_", "RAY_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster.dashboard)
    monkeypatch.setenv("RLAUNCH_RAY_GCS_ADDRESS", ray_cluster.gcs)
    return ray_cluster


@pytest.fixture
def backend(ray_env: RayCluster) -> Iterator[object]:
    from rlaunch.cluster.ray.backend import RayBackend

    backend = RayBackend(kill_grace=1.0)
    yield backend
    left = [s.job_id for s in backend.list_jobs() if not s.state.terminal]
    for job_id in left:
        backend.cancel(job_id, reason="test teardown")
    assert not left, f"jobs left running after the test (cancelled now): {left}"
