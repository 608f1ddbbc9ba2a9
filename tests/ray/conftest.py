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

from collections.abc import Iterator

import pytest
from ray_clusters import RAY_MISSING, RayCluster, cluster_environment, ray_importable, start_head, stop

from tests.support.live_clusters import cluster_env, jobs_finished_by_the_test, stopped_at_the_end

CLUSTER_CPUS = 4
CLUSTER_MEMORY = 8 * 10**9


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    if not ray_importable():
        pytest.skip(RAY_MISSING)
    cluster = start_head(num_cpus=CLUSTER_CPUS, memory=CLUSTER_MEMORY, env=cluster_environment())
    yield from stopped_at_the_end(cluster, stop, "Ray cluster")


@pytest.fixture
def ray_env(ray_cluster: RayCluster, monkeypatch: pytest.MonkeyPatch) -> RayCluster:
    """RAY_ADDRESS (the dashboard) and the GCS address for this test; no developer settings."""
    cluster_env(
        monkeypatch, ("RLAUNCH_", "RAY_"), RAY_ADDRESS=ray_cluster.dashboard, RLAUNCH_RAY_GCS_ADDRESS=ray_cluster.gcs
    )
    return ray_cluster


@pytest.fixture
def backend(ray_env: RayCluster) -> Iterator[object]:
    from rlaunch.cluster.ray.backend import RayBackend

    yield from jobs_finished_by_the_test(RayBackend(kill_grace=1.0))
