"""The rehearsal's placement-group reading against real Ray (CPU only, logical GPUs).

Two nodes started the way the bootstrap starts them (`RayNode`, labelled `rlaunch-rank` 0 and 1,
one logical GPU each); a driver places a PACK group of two 1-GPU bundles, which can only be placed
across both nodes, asks for a group no node can hold, and exits, as SkyRL's driver does when its
worker meets a GPU-only import. Read after the driver's end, Ray's table must still give the placed
group (removed with its driver) with one GPU on each rank, and not the group that was never placed.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from rlaunch.task import rehearsal
from rlaunch.task.ray_node import NodeSpec, RayNode
from tests.multinode.test_ray_gang import free_port
from tests.support.polling import wait_for

pytestmark = [
    pytest.mark.multinode,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs the ray extra: pip install -e '.[ray]'"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="two node addresses (127.0.0.1, 127.0.0.2)"),
]

DRIVER = """
import sys, time, ray
ray.init(address=sys.argv[1])
group = ray.util.placement_group([{"GPU": 1, "CPU": 1}] * 2, strategy="PACK")
ray.get(group.ready(), timeout=60)
never = ray.util.placement_group([{"GPU": 3}], strategy="STRICT_PACK")  # no node has 3 GPUs
time.sleep(1)
print("placed; exiting", flush=True)
"""


def test_a_group_the_driver_placed_is_read_after_the_driver_has_exited() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    port, nodes = free_port(), []
    try:
        for rank in (0, 1):
            head = None if rank == 0 else f"127.0.0.1:{port}"
            spec = NodeSpec(rank, f"127.0.0.{rank + 1}", 2, 1, 2 * 1024**3, port, head_address=head)
            nodes.append(RayNode(spec, sys.executable, env, lambda line: None).start())
        gcs = f"127.0.0.1:{port}"
        driver = subprocess.run(
            [sys.executable, "-c", DRIVER, gcs], env=env, capture_output=True, text=True, timeout=300
        )
        assert driver.returncode == 0 and "placed; exiting" in driver.stdout, driver.stderr[-3000:]

        def removed() -> list | None:  # Ray removes a driver's groups when its job ends
            groups = rehearsal.placed_groups(sys.executable, env, gcs)
            return groups if groups and all(g.state == "REMOVED" for g in groups) else None

        (group,) = wait_for(removed, timeout=60, what="the driver's groups removed", interval=1.0)
        assert group.strategy == "PACK" and group.gpus_by_rank == {0: 1.0, 1: 1.0} and group.bundles == 2
        assert rehearsal.spans_gang(group, world=2, gpus_per_node=1)
    finally:
        for node in reversed(nodes):
            node.stop()
            node.remove_temp_dir()
