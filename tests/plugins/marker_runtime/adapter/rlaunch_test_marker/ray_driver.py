"""The `test-ray-driver` entrypoint: a Ray driver that needs every node of the gang.

It attaches to the cluster at RAY_ADDRESS (never starting one of its own), places a STRICT_SPREAD
placement group with one bundle per node (`trainer.placement.policy_num_nodes`), each asking for
that node's logical GPUs (`policy_num_gpus_per_node`), runs one task per bundle and records in
`<attempt>/ray_spread.json` the node (id and `rlaunch-rank` label) each task ran on and the GPU ids
Ray gave it. Then it writes the trainer's records through `entry.run` (scenarios included:
`slow` keeps printing for two minutes after placing, `silent` sleeps without a word before placing:
the liveness watchdog's case; `attach_only` records the cluster it attached to in `ray_attach.json` and
places nothing).
"""

from __future__ import annotations

import os
import sys
import time

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from rlaunch_test_marker.entry import _get, _write, read_document, run

PLACEMENT_TIMEOUT = 120.0


@ray.remote
def where(bundle: int) -> dict:
    context = ray.get_runtime_context()
    node_id = context.get_node_id()
    labels = next((n.get("Labels") or {} for n in ray.nodes() if n["NodeID"] == node_id), {})
    return {
        "bundle": bundle,
        "node_id": node_id,
        "rank": labels.get("rlaunch-rank"),
        "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
        "pid": os.getpid(),
    }


def spread(skyrl: dict) -> list[dict]:
    nodes = _get(skyrl, "trainer.placement.policy_num_nodes")
    gpus = _get(skyrl, "trainer.placement.policy_num_gpus_per_node")
    group = placement_group([{"CPU": 0.5, "GPU": gpus}] * nodes, strategy="STRICT_SPREAD")
    ray.get(group.ready(), timeout=PLACEMENT_TIMEOUT)
    tasks = [
        where.options(
            num_cpus=0.5,
            num_gpus=gpus,
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i),
        ).remote(i)
        for i in range(nodes)
    ]
    placed = ray.get(tasks, timeout=PLACEMENT_TIMEOUT)
    remove_placement_group(group)
    return placed


def main() -> None:
    skyrl, export_hf = read_document()
    address = os.environ["RAY_ADDRESS"]  # the gang's cluster: never start one here
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    print(f"driver attached to {address}: {len(ray.nodes())} node(s)", flush=True)
    scenario = _get(skyrl, "environment.env_class")
    if scenario == "silent":
        time.sleep(3600)
    if scenario == "attach_only":  # a cluster without GPUs: record what it attached to, place nothing
        nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
        _write(f"{os.environ['RLAUNCH_ATTEMPT_DIR']}/ray_attach.json", {"address": address, "nodes": nodes})
        ray.shutdown()
        sys.exit(run({**skyrl, "environment": {**skyrl["environment"], "env_class": "ok"}}, export_hf))
    placed = spread(skyrl)
    _write(f"{os.environ['RLAUNCH_ATTEMPT_DIR']}/ray_spread.json", {"address": address, "tasks": placed})
    print(f"tasks ran on ranks {sorted(str(p['rank']) for p in placed)}", flush=True)
    if scenario == "slow":
        for second in range(120):
            print(f"working {second}", flush=True)
            time.sleep(1)
    ray.shutdown()
    sys.exit(run(skyrl, export_hf))


if __name__ == "__main__":
    main()
