"""The Ray task that runs one replica attempt inside its placement-group bundle.

A streaming generator: the driver iterates over its results while it runs, so the replica's
output reaches the job log as it is printed (Ray's own worker-log forwarding is off: it prefixes,
batches and de-duplicates lines). The first results say where the attempt runs (the rendezvous
and the node), then come `replica.run_attempt`'s events.

Rendezvous: rank 0's first attempt picks a free port on its own node and publishes `host:port`
in the internal KV; the other ranks, started at the same time, wait for it there before they
start their replica (so every worker starts in parallel). Retries get the known rendezvous.

Cancelling the task (`ray.cancel`) raises KeyboardInterrupt inside it, which stops the keeper
and with it the replica's process group; if the worker dies outright the keeper notices on its
own. Ray never retries it (the driver owns retries, per replica, like the local backend).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

import ray

from rlaunch.cluster.job_environment import free_port
from rlaunch.cluster.protocol import JOB_ID_ENV
from rlaunch.cluster.ray.contract import GCS_ADDRESS_ENV
from rlaunch.cluster.ray.kv import StatusStore
from rlaunch.cluster.ray.replica import replica_cwd, replica_environment, run_attempt
from rlaunch.waiting import wait_until

RENDEZVOUS_POLL_SECONDS = 0.05


def _rendezvous(job_env: Mapping[str, str], rank: int, node_ip: str) -> str:
    store = StatusStore.connect(job_env.get(GCS_ADDRESS_ENV))
    job_id = job_env[JOB_ID_ENV]
    if rank == 0:
        address = f"{node_ip}:{free_port()}"
        if store is not None:
            store.put_rendezvous(job_id, address)
        return address
    if store is None:
        raise RuntimeError(f"rank {rank} cannot reach the cluster's KV to learn the rendezvous")
    # No limit: the driver cancels this task if rank 0 never gets there.
    return wait_until(lambda: store.rendezvous(job_id), None, "rank 0's rendezvous address", RENDEZVOUS_POLL_SECONDS)


@ray.remote(max_retries=0, retry_exceptions=False, num_returns="streaming")  # type: ignore[untyped-decorator]
def replica_attempt(
    argv: list[str],
    job_env: Mapping[str, str],
    rank: int,
    rendezvous: str | None,
    accelerators: int,
    uploaded: bool,
    cwd_hint: str | None,
    grace: float,
) -> Iterator[tuple[str, Any]]:
    node_ip = ray.util.get_node_ip_address()
    node_id = ray.get_runtime_context().get_node_id()
    yield ("node", {"node_id": node_id, "ip": node_ip, "pid": os.getpid()})
    if rendezvous is None:
        rendezvous = _rendezvous(job_env, rank, node_ip)
    yield ("rendezvous", rendezvous)
    env = replica_environment(
        job_env, rank=rank, rendezvous=rendezvous, node_id=node_id, node_ip=node_ip, accelerators=accelerators
    )
    yield from run_attempt(argv, env, replica_cwd(uploaded, cwd_hint), grace)
