"""`python ray_probe.py versions | wait-nodes ADDRESS COUNT TIMEOUT | placement-groups ADDRESS`: questions only Ray can answer.

Run by path with the *runtime's* interpreter (the one whose `ray` starts the cluster and runs the
driver), so it imports only the standard library and ray: never rlaunch.

  versions      prints {"python": "3.12.1", "ray": "2.60.0"} (ray: null when not installed).
  wait-nodes    polls the cluster's GCS until COUNT nodes are alive, printing one JSON line per
                change: {"alive_ranks": [0, 1], "alive": 2}. Ranks come from each node's
                `rlaunch-rank` label. Exit 0 once COUNT are alive, 3 after TIMEOUT seconds.
  placement-groups  reads the GCS's placement-group table once and prints it as one JSON line:
                {"placement_groups": [{"id", "name", "strategy", "state", "created", "bundles":
                [{"index", "rank", "resources"}]}]}. `created`: Ray finished placing the group
                (it is CREATED, or was before it was removed: Ray keeps a removed group in the
                table with the nodes its bundles were on and its creation latency); `rank` is the
                `rlaunch-rank` of the node a bundle is (or was) on, null when it was never placed.
                Exit 0, or 1 after a few failed tries (one {"error"} line each).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

RANK_LABEL = "rlaunch-rank"
TIMED_OUT = 3


def versions() -> int:
    import importlib.metadata

    try:
        ray_version: str | None = importlib.metadata.version("ray")
    except importlib.metadata.PackageNotFoundError:
        ray_version = None
    print(json.dumps({"python": ".".join(map(str, sys.version_info[:3])), "ray": ray_version}), flush=True)
    return 0


def _alive_ranks(client: object) -> list[int]:
    ranks = []
    for info in client.get_all_node_info(timeout=10).values():  # type: ignore[attr-defined]
        if info.state != 0:  # GcsNodeInfo.GcsNodeState.ALIVE
            continue
        label = dict(info.labels).get(RANK_LABEL)
        ranks.append(int(label) if label is not None and label.isdigit() else -1)
    return sorted(ranks)


def wait_nodes(address: str, count: int, timeout: float) -> int:
    # the GCS client alone: no driver, no job, no workers
    from ray._raylet import GcsClient

    client = GcsClient(address=address)
    deadline = time.monotonic() + timeout
    last: list[int] | None = None
    while True:
        try:
            ranks = _alive_ranks(client)
        except Exception as exc:  # noqa: BLE001 - the GCS not answering yet is a normal state
            ranks = []
            print(json.dumps({"error": str(exc)[:300]}), flush=True)
        if ranks != last:
            print(json.dumps({"alive_ranks": ranks, "alive": len(ranks)}), flush=True)
            last = ranks
        if len(ranks) >= count:
            return 0
        if time.monotonic() >= deadline:
            return TIMED_OUT
        time.sleep(0.5)  # this script runs in the runtime's venv, without rlaunch and its wait_until


def _node_ranks(client: object) -> dict[str, int]:
    """node id (hex) -> its `rlaunch-rank` label, for every node the GCS knows (-1: unlabelled)."""
    out = {}
    for node_id, info in client.get_all_node_info(timeout=10).items():  # type: ignore[attr-defined]
        label = dict(info.labels).get(RANK_LABEL)
        out[node_id.hex()] = int(label) if label is not None and label.isdigit() else -1
    return out


def _group(info: dict[str, Any], ranks: dict[str, int]) -> dict[str, Any]:
    stats = info.get("stats") or {}
    return {
        "id": info["placement_group_id"],
        "name": info["name"],
        "strategy": info["strategy"],
        "state": info["state"],
        "created": info["state"] == "CREATED" or float(stats.get("end_to_end_creation_latency_ms") or 0) > 0,
        "bundles": [
            {
                "index": int(index),
                "rank": ranks.get(info["bundles_to_node_id"].get(index, ""), None),
                "resources": resources,
            }
            for index, resources in sorted(info["bundles"].items())
        ],
    }


def placement_groups(address: str, tries: int = 5) -> int:
    from ray._private.state import GlobalState  # the GCS's tables without a driver or a job
    from ray._raylet import GcsClient, GcsClientOptions

    client = GcsClient(address=address)
    state = GlobalState()
    state._initialize_global_state(
        GcsClientOptions.create(address, None, allow_cluster_id_nil=True, fetch_cluster_id_if_nil=False)
    )
    for attempt in range(tries):
        try:
            ranks = _node_ranks(client)
            groups = [_group(info, ranks) for _, info in sorted(state.placement_group_table().items())]
        except Exception as exc:  # noqa: BLE001 - a GCS not answering for a moment is not the end
            print(json.dumps({"error": str(exc)[:300]}), flush=True)
            time.sleep(1.0 + attempt)  # a retry in the runtime's venv (no rlaunch, no wait_until)
        else:
            print(json.dumps({"placement_groups": groups}), flush=True)
            return 0
    return 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["versions"]:
        return versions()
    if argv[:1] == ["wait-nodes"] and len(argv) == 4:
        return wait_nodes(argv[1], int(argv[2]), float(argv[3]))
    if argv[:1] == ["placement-groups"] and len(argv) == 2:
        return placement_groups(argv[1])
    print(
        "usage: ray_probe.py versions | wait-nodes ADDRESS COUNT TIMEOUT | placement-groups ADDRESS",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
