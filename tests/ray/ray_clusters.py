"""Real Ray clusters for the tests, started as one process each and stopped by that PID.

`start_head` runs `ray start --head --block` as a single child process (it owns every Ray
process it starts: GCS, raylet, dashboard, agents, workers), on free ports, with a bounded number
of CPUs and its own short temp dir (Ray's socket paths must stay under 107 characters).
`stop` terminates that PID, waits, and returns whatever is left that belongs to the cluster: its
processes (their command line or working directory is under the temp dir) and anything still
carrying its address in its environment (a job's replicas). The caller asserts that is empty.

`ray_multinode.py INFO_FILE ...` (run as a script) is the same for a multi-node cluster built with Ray's
test utility (`ray.cluster_utils.Cluster`: a head and two worker raylets on this machine).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.live_clusters import free_ports

CLUSTER_ONLY_VARIABLE = "RLAUNCH_TEST_CLUSTER_ONLY"
RAY_MISSING = "ray is not installed here; install the extra: pip install -e '.[ray]'"
START_TIMEOUT = 90.0
STOP_TIMEOUT = 30.0
LEFTOVER_WAIT = 15.0


def ray_importable() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("ray") is not None
    except ValueError:  # sys.modules["ray"] is None: ray is blocked here
        return False


def cluster_environment() -> dict[str, str]:
    """The environment Ray's processes start with: this one, minus rlaunch and Ray settings, plus
    a marker variable that replicas must never see (they start from an allow-list)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLAUNCH_", "RAY_"))}
    env[CLUSTER_ONLY_VARIABLE] = "visible-to-ray-processes-only"
    return env


@dataclass
class RayCluster:
    process: subprocess.Popen[bytes]
    dashboard: str  # http://127.0.0.1:<port>
    gcs: str  # 127.0.0.1:<port>
    temp_dir: Path
    log: Path
    nodes: list[str] = field(default_factory=list)  # node ids, head first (multi-node only)

    @property
    def pid(self) -> int:
        return self.process.pid


def _alive_nodes(dashboard: str) -> list[dict[str, object]]:
    try:
        with urllib.request.urlopen(f"{dashboard}/api/v0/nodes?detail=1", timeout=5) as response:
            rows = json.loads(response.read())["data"]["result"]["result"]
    except (OSError, ValueError, KeyError):
        return []
    return [r for r in rows if r.get("state") == "ALIVE"]


def wait_until_up(cluster: RayCluster, nodes: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while len(_alive_nodes(cluster.dashboard)) < nodes:
        if cluster.process.poll() is not None or time.monotonic() > deadline:
            log = cluster.log.read_text(errors="replace")[-4000:] if cluster.log.exists() else ""
            stop(cluster)
            raise RuntimeError(f"the test Ray cluster did not come up (exit {cluster.process.poll()}):\n{log}")
        time.sleep(0.25)


def start_head(*, num_cpus: int, memory: int, env: dict[str, str]) -> RayCluster:
    temp_dir = Path(tempfile.mkdtemp(prefix="rlr-", dir="/tmp"))
    names = (
        "port",
        "dashboard-port",
        "ray-client-server-port",
        "dashboard-agent-listen-port",
        "dashboard-agent-grpc-port",
        "runtime-env-agent-port",
        "metrics-export-port",
        "node-manager-port",
        "object-manager-port",
    )
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    ray = Path(sys.executable).with_name("ray")
    argv = [
        str(ray) if ray.exists() else (shutil.which("ray") or "ray"),
        "start",
        "--head",
        "--block",
        f"--num-cpus={num_cpus}",
        "--num-gpus=0",
        f"--memory={memory}",
        "--object-store-memory=100000000",
        "--node-ip-address=127.0.0.1",
        "--dashboard-host=127.0.0.1",
        "--include-dashboard=true",
        "--disable-usage-stats",
        f"--temp-dir={temp_dir}",
        "--min-worker-port=0",
        "--max-worker-port=0",
        *(f"--{name}={port}" for name, port in ports.items()),
    ]
    log = temp_dir / "head.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    cluster = RayCluster(
        process=process,
        dashboard=f"http://127.0.0.1:{ports['dashboard-port']}",
        gcs=f"127.0.0.1:{ports['port']}",
        temp_dir=temp_dir,
        log=log,
    )
    wait_until_up(cluster, 1)
    return cluster


def start_multinode(*, worker_cpus: int, workers: int, env: dict[str, str]) -> RayCluster:
    """Ray's multi-node test utility in a child process: a head with no CPUs and `workers` raylets."""
    temp_dir = Path(tempfile.mkdtemp(prefix="rlm-", dir="/tmp"))
    info = temp_dir / "cluster.json"
    log = temp_dir / "multinode.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).with_name("ray_multinode.py")),
                str(info),
                str(workers),
                str(worker_cpus),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**env, "RAY_TMPDIR": str(temp_dir)},
            cwd=temp_dir,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while not info.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            text = log.read_text(errors="replace")[-4000:]
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            shutil.rmtree(temp_dir, ignore_errors=True)
            raise RuntimeError(f"the multi-node test cluster did not come up:\n{text}")
        time.sleep(0.25)
    data = json.loads(info.read_text())
    cluster = RayCluster(
        process=process, dashboard=data["dashboard"], gcs=data["gcs"], temp_dir=temp_dir, log=log, nodes=data["nodes"]
    )
    wait_until_up(cluster, workers + 1)
    return cluster


def _cluster_processes(cluster: RayCluster) -> list[str]:
    """`pid cmdline` of live processes that belong to the cluster (excluding this one)."""
    temp = str(cluster.temp_dir)
    gcs_port = cluster.gcs.rpartition(":")[2]
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        base = f"/proc/{entry}"
        try:
            with open(f"{base}/stat", encoding="utf-8", errors="replace") as handle:
                if handle.read().rpartition(")")[2].split()[0] in ("Z", "X"):
                    continue
            with open(f"{base}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"{base}/environ", "rb") as handle:
                environ = handle.read().split(b"\0")
            cwd = os.readlink(f"{base}/cwd")
        except OSError:
            continue
        mine = (
            temp in cmdline
            or cwd.startswith(temp)
            or any(
                var.startswith((b"RLAUNCH_RAY_GCS_ADDRESS=", b"RAY_ADDRESS=")) and var.endswith(f":{gcs_port}".encode())
                for var in environ
            )
        )
        if mine:
            found.append(f"{entry} {cmdline[:200]}")
    return found


def stop(cluster: RayCluster) -> list[str]:
    """Stop the cluster by its PID; return what belonged to it and still ran (killed by then)."""
    if cluster.process.poll() is None:
        cluster.process.terminate()
        try:
            cluster.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            cluster.process.kill()
            cluster.process.wait()
    deadline = time.monotonic() + LEFTOVER_WAIT
    left = _cluster_processes(cluster)
    while left and time.monotonic() < deadline:
        time.sleep(0.25)
        left = _cluster_processes(cluster)
    for line in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(line.split()[0]), signal.SIGKILL)
    shutil.rmtree(cluster.temp_dir, ignore_errors=True)
    return left
