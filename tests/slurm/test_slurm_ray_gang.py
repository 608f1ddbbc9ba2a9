"""A Ray-driver runtime on a 2-node Slurm gang: the ranks meet through the rendezvous and form one
Ray cluster across the allocation (rank 0's head on n1 at 127.0.0.1, rank 1's raylet on n2 at
127.0.0.2, one logical GPU each), and the driver's STRICT_SPREAD placement group uses both nodes.
No Ray process of the gang is left afterwards."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.multinode.test_ray_gang import PLUGINS, VERSION, clean_up, node_records, ray_leftovers
from tests.slurm.slurm_cluster import SlurmCluster
from tests.support.launchers import MULTINODE_SKIP, Launcher
from tests.support.live_clusters import free_port

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        __import__("importlib").util.find_spec("ray") is None, reason="needs the ray extra: pip install -e '.[ray]'"
    ),
]


def test_a_two_node_slurm_gang_forms_one_ray_cluster_across_both_nodes(tmp_path: Path, slurm_env: SlurmCluster) -> None:
    launcher = Launcher(
        tmp_path / "prefix",
        {
            "RLAUNCH_RUNTIME_PLUGINS": PLUGINS,
            "SLURM_CONF": str(slurm_env.conf),
            "RLAUNCH_SLURM_ROOT": os.environ["RLAUNCH_SLURM_ROOT"],
        },
    )
    done = launcher.run(
        "-m", "tests.experiments.marker", "--version", VERSION, "--runtime", "test-ray-driver", "--backend", "slurm",
        "--replicas", "2", "--ray-port", str(free_port()), "--run", *MULTINODE_SKIP, timeout=600,
    )  # fmt: skip
    (attempt,) = [p for p in (launcher.prefix / ".tmp").glob("ttl=*/marker/rl/*/attempts/*") if p.is_dir()]
    try:
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        assert "via slurm" in done.stdout
        spread = json.loads((attempt / "ray_spread.json").read_text())
        assert sorted(t["rank"] for t in spread["tasks"]) == ["0", "1"]  # one task on each node's raylet
        assert len({t["node_id"] for t in spread["tasks"]}) == 2 and all(t["gpu_ids"] for t in spread["tasks"])
        head = json.loads((attempt / "rendezvous" / "head.json").read_text())
        assert head["num_nodes"] == 2 and head["address"] == "127.0.0.1"
        nodes = node_records(attempt)
        assert {nodes[0]["address"], nodes[1]["address"]} == {"127.0.0.1", "127.0.0.2"}
        assert nodes[1]["state"] == "left" and nodes[1]["gang_epoch"] == head["gang_epoch"]
        record = json.loads((launcher.prefix / "marker" / "rl" / VERSION / "run_record.json").read_text())
        (run,) = record["attempts"]
        assert run["backend"] == "slurm" and run["state"] == "succeeded"
        shown = slurm_env.command("scontrol", "show", "job", run["child_job_id"], "-o")
        assert "NumNodes=2" in shown and "NodeList=n[1-2]" in shown, shown
        assert ray_leftovers(attempt) == []
    finally:
        clean_up(attempt)
