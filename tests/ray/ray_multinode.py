"""`python tests/ray/ray_multinode.py INFO_FILE WORKERS WORKER_CPUS`: a multi-node Ray cluster on
this machine with Ray's own test utility, alive until SIGTERM.

The head has the dashboard (for the Jobs API) and no CPUs, so jobs' bundles land on the worker
raylets; each worker has WORKER_CPUS CPUs. INFO_FILE gets the addresses and node ids once every
node is up. On SIGTERM every node is removed (`Cluster.shutdown`) before exiting.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def main() -> int:
    info_file, workers, worker_cpus = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    from ray.cluster_utils import Cluster

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    temp_dir = os.path.join(os.environ["RAY_TMPDIR"], "ray")  # where Ray writes its address file too
    os.makedirs(temp_dir, exist_ok=True)
    dashboard_port = _free_port()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 0,
            "include_dashboard": True,
            "dashboard_host": "127.0.0.1",
            "dashboard_port": dashboard_port,
            "dashboard_agent_listen_port": _free_port(),
            "temp_dir": temp_dir,
            "object_store_memory": 80 * 1024 * 1024,
            "memory": 2 * 10**9,
        },
    )
    try:
        nodes = [cluster.head_node.node_id]
        for _ in range(workers):
            node = cluster.add_node(num_cpus=worker_cpus, object_store_memory=80 * 1024 * 1024, memory=2 * 10**9)
            nodes.append(node.node_id)
        cluster.wait_for_nodes()
        gcs_port = cluster.gcs_address.rpartition(":")[2]
        with open(info_file + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(
                {"dashboard": f"http://127.0.0.1:{dashboard_port}", "gcs": f"127.0.0.1:{gcs_port}", "nodes": nodes},
                handle,
            )
        os.replace(info_file + ".tmp", info_file)
        print(f"multi-node cluster up: {nodes}", flush=True)
        stop.wait()
    finally:
        cluster.shutdown()
    print("multi-node cluster stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
