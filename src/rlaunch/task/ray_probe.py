"""`python ray_probe.py versions | wait-nodes ADDRESS COUNT TIMEOUT`: questions only Ray can answer.

Run by path with the *runtime's* interpreter (the one whose `ray` starts the cluster and runs the
driver), so it imports only the standard library and ray: never rlaunch.

  versions      prints {"python": "3.12.1", "ray": "2.60.0"} (ray: null when not installed).
  wait-nodes    polls the cluster's GCS until COUNT nodes are alive, printing one JSON line per
                change: {"alive_ranks": [0, 1], "alive": 2}. Ranks come from each node's
                `rlaunch-rank` label. Exit 0 once COUNT are alive, 3 after TIMEOUT seconds.
"""

from __future__ import annotations

import json
import sys
import time

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
    from ray._raylet import GcsClient  # the GCS client alone: no driver, no job, no workers

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
        time.sleep(0.5)


def main(argv: list[str]) -> int:
    if argv[:1] == ["versions"]:
        return versions()
    if argv[:1] == ["wait-nodes"] and len(argv) == 4:
        return wait_nodes(argv[1], int(argv[2]), float(argv[3]))
    print("usage: ray_probe.py versions | wait-nodes ADDRESS COUNT TIMEOUT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
