"""The rehearsal's placement-group watcher against real Ray (CPU only, logical GPUs).

Two nodes started the way the bootstrap starts them (`RayNode`, labelled `rlaunch-rank` 0 and 1,
one logical GPU each); a driver places a PACK group of two 1-GPU bundles, which can only be
placed across both nodes; the watcher must report one GPU on each rank while the group is placed.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time

import pytest

from rlaunch.task import rehearsal
from rlaunch.task.ray_node import NodeSpec, RayNode
from tests.multinode.test_ray_gang import free_port

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
print("placed", flush=True)
time.sleep(120)
"""


def test_the_watcher_sees_a_group_placed_across_both_nodes() -> None:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    port, nodes = free_port(), []
    driver = watcher = None
    try:
        for rank in (0, 1):
            head = None if rank == 0 else f"127.0.0.1:{port}"
            spec = NodeSpec(rank, f"127.0.0.{rank + 1}", 2, 1, 2 * 1024**3, port, head_address=head)
            nodes.append(RayNode(spec, sys.executable, env, lambda line: None).start())
        gcs = f"127.0.0.1:{port}"
        watcher = rehearsal.PlacementWatcher(sys.executable, env, gcs)
        driver = subprocess.Popen([sys.executable, "-c", DRIVER, gcs], env=env, stdout=subprocess.PIPE, text=True)
        assert driver.stdout is not None and driver.stdout.readline().strip() == "placed"
        deadline = time.monotonic() + 30
        while watcher.best is None and time.monotonic() < deadline:
            time.sleep(0.5)
        group = watcher.stop()
        assert group is not None and group.state == "CREATED" and group.strategy == "PACK"
        assert group.gpus_by_rank == {0: 1.0, 1: 1.0} and group.bundles == 2
        assert rehearsal.spans_gang(group, world=2, gpus_per_node=1)
    finally:
        if watcher is not None:
            watcher.stop()
        if driver is not None:
            driver.kill()
            driver.wait()
        for node in reversed(nodes):
            node.stop()
            node.remove_temp_dir()
