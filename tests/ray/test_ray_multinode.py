"""A gang on a multi-node cluster (Ray's `cluster_utils.Cluster`: a head and two worker raylets on
this machine) is placed STRICT_SPREAD, one replica per node; a gang that cannot be spread over the
nodes there are is refused before it is submitted."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from ray_clusters import RAY_MISSING, RayCluster, cluster_environment, ray_importable, start_multinode, stop
from ray_helpers import py

from rlaunch.cluster.protocol import CapacityError, JobSpec, JobState, Resources

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def multinode() -> Iterator[RayCluster]:
    if not ray_importable():
        pytest.skip(RAY_MISSING)
    cluster = start_multinode(worker_cpus=1, workers=2, env=cluster_environment())
    try:
        yield cluster
    finally:
        left = stop(cluster)
        assert not left, f"processes of the multi-node test cluster outlived it (killed now): {left}"


def test_a_two_node_gang_runs_one_replica_per_node(multinode: RayCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith(("RLAUNCH_", "RAY_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("RAY_ADDRESS", multinode.dashboard)
    monkeypatch.setenv("RLAUNCH_RAY_GCS_ADDRESS", multinode.gcs)
    from rlaunch.cluster.ray.backend import RayBackend

    backend = RayBackend(kill_grace=1.0)
    code = "import os; print(os.environ['RLAUNCH_RAY_NODE_ID'], os.environ['RLAUNCH_RENDEZVOUS'], os.environ['RLAUNCH_REPLICA_RANK'])"
    spec = JobSpec(name="spread", argv=py(code), replicas=2, resources=Resources(cpu=1))
    assert backend.check(spec) == "STRICT_SPREAD"
    job_id = backend.submit(spec)
    status = backend.wait(job_id, timeout=180)
    assert status.state == JobState.SUCCEEDED, backend.client.get_job_logs(job_id)
    seen = [next(iter(backend.logs(job_id, replica=rank))).split() for rank in (0, 1)]
    nodes = {node for node, _, _ in seen}
    head, *workers = multinode.nodes
    assert nodes == set(workers), f"replicas ran on {nodes}; the worker nodes are {workers} (head {head})"
    assert seen[0][1] == seen[1][1]  # one rendezvous for the gang
    assert [rank for _, _, rank in seen] == ["0", "1"]

    with pytest.raises(CapacityError, match="STRICT_SPREAD puts each replica on its own node, so it needs 3 nodes"):
        RayBackend(strategy="STRICT_SPREAD").submit(
            JobSpec(name="wider", argv=("true",), replicas=3, resources=Resources(cpu=1))
        )
    with pytest.raises(CapacityError, match=r"CPU: 3 replicas need 3 \(1 each\) but the cluster has 2 in total"):
        backend.submit(JobSpec(name="wider", argv=("true",), replicas=3, resources=Resources(cpu=1)))
    assert [s.job_id for s in backend.list_jobs()] == [job_id]
