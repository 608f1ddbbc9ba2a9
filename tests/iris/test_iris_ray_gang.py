"""Real Ray across a 2-node Iris gang, its head found through Iris's endpoint registry.

`tests.experiments.marker --backend iris --runtime test-ray-driver --replicas 2` launches for real:
coordinator job, host, the 2-task child gang coscheduled on a two-VM CPU slice; rank 0 starts the
Ray head on the port Iris reserved for it (named port `ray-head`) and publishes the head record as
an Iris endpoint; rank 1 resolves it and joins; the driver places one task on each node's raylet.
"""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from tests.iris.iris_cluster import IrisCluster
from tests.support.launchers import MULTINODE_SKIP, REPO, Launcher

pytestmark = [
    pytest.mark.iris,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs Ray in this environment"),
]

VERSION = "2026.11.30"
PLUGINS = "tests.plugins.marker_runtime,tests.plugins.ray_driver_runtime"


def test_ray_forms_across_an_iris_gang_through_the_endpoint_registry(tmp_path, iris_env: IrisCluster) -> None:
    launcher = Launcher(
        tmp_path / "prefix",
        {
            "IRIS_CONTROLLER_URL": iris_env.url,
            "RLAUNCH_RUNTIME_PLUGINS": PLUGINS,
            "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")]),
        },
    )
    done = launcher.run(
        "-m", "tests.experiments.marker", "--version", VERSION, "--backend", "iris", "--runtime", "test-ray-driver",
        "--replicas", "2", "--run", *MULTINODE_SKIP, timeout=600,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    (attempt,) = [p for p in (launcher.prefix / ".tmp").glob("ttl=*/marker/rl/*/attempts/*") if p.is_dir()]

    spread = json.loads((attempt / "ray_spread.json").read_text())
    assert sorted(t["rank"] for t in spread["tasks"]) == ["0", "1"]  # one task on each node's raylet
    assert len({t["node_id"] for t in spread["tasks"]}) == 2

    rendezvous = attempt / "rendezvous"
    assert not (rendezvous / "head.json").exists()  # the head record went through Iris's endpoint registry
    outcome = json.loads((rendezvous / "outcome.json").read_text())
    assert (outcome["state"], outcome["exit_code"]) == ("succeeded", 0)
    nodes = {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in (rendezvous / "nodes").glob("rank-*.json")}
    assert {nodes[0]["address"], nodes[1]["address"]} == {"127.0.0.1", "127.0.0.2"}
    assert nodes[1]["state"] == "left" and nodes[1]["gang_epoch"] == outcome["gang_epoch"]
    assert "published the Ray head record" in output

    record = json.loads((launcher.prefix / "marker" / "rl" / VERSION / "run_record.json").read_text())
    (entry,) = record["attempts"]
    assert entry["backend"] == "iris" and entry["child_job_id"].startswith(entry["coordinator_job_id"] + "/")
