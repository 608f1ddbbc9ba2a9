"""Real Ray across a 2-node gang of the local backend (CPU only, logical GPUs).

Two "nodes" on one machine are two raylets: rank 0's head on 127.0.0.1 and rank 1's worker on
127.0.0.2, each labelled with its rank and declaring one logical GPU, so the `test-ray-driver`
runtime's STRICT_SPREAD placement group (one bundle per node, one GPU each) needs both. The first
test launches for real (experiment, coordinator, host, child gang, staging); the others run the
task bootstrap on documents derived from that run's resolved document, with short timeouts.
Every test checks, by PID, that no Ray process of the gang is left.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlaunch.cluster.protocol import JobSpec, JobState
from rlaunch.task.rendezvous import HeadRecord, StorageRendezvous
from tests.support.launchers import MULTINODE_SKIP, REPO, Launcher
from tests.support.live_clusters import free_port
from tests.support.polling import pid_alive

pytestmark = [
    pytest.mark.multinode,
    pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="needs the ray extra: pip install -e '.[ray]'"),
]

VERSION = "2026.11.30"
PLUGINS = "tests.plugins.marker_runtime,tests.plugins.ray_driver_runtime"
LEFTOVER_WAIT = 20.0


@dataclass
class GangRun:
    launcher: Launcher
    returncode: int
    output: str
    attempt: Path
    derived: list[Path] = field(default_factory=list)  # attempts of documents derived from this run

    @property
    def prefix(self) -> Path:
        return self.launcher.prefix


def node_records(attempt: Path) -> dict[int, dict[str, Any]]:
    nodes = attempt / "rendezvous" / "nodes"
    return {int(p.stem.split("-")[1]): json.loads(p.read_text()) for p in nodes.glob("rank-*.json")}


def _mentioning(text: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if text.encode() in Path(f"/proc/{entry}/cmdline").read_bytes() and pid_alive(int(entry)):
                    found.append(int(entry))
    return found


def ray_leftovers(attempt: Path) -> list[int]:
    """Live Ray processes of the gang: the pids each rank recorded, and anything naming a rank's
    private Ray temp dir (workers Ray started later). Waits a little for processes on their way out."""
    records = node_records(attempt).values()
    deadline = time.monotonic() + LEFTOVER_WAIT
    while True:
        left = {p for r in records for p in r.get("ray_pids", []) if pid_alive(p)}
        for record in records:
            if record.get("ray_temp_dir"):
                left.update(_mentioning(record["ray_temp_dir"]))
        if not left or time.monotonic() > deadline:
            return sorted(left)
        time.sleep(0.5)


def clean_up(attempt: Path) -> None:
    """Kill what a failed test left running, and remove the ranks' Ray temp dirs (a rank killed
    with -9 cannot remove its own)."""
    if not (attempt / "rendezvous" / "nodes").is_dir():
        return
    for record in node_records(attempt).values():
        for pid in [*record.get("ray_pids", []), *_mentioning(record.get("ray_temp_dir") or "/nonexistent")]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if record.get("ray_temp_dir"):
            shutil.rmtree(record["ray_temp_dir"], ignore_errors=True)


@pytest.fixture(scope="module")
def gang_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GangRun]:
    launcher = Launcher(tmp_path_factory.mktemp("gang") / "prefix", {"RLAUNCH_RUNTIME_PLUGINS": PLUGINS})
    done = launcher.run(
        "-m", "tests.experiments.marker", "--version", VERSION, "--runtime", "test-ray-driver",
        "--replicas", "2", "--ray-port", str(free_port()), "--run", *MULTINODE_SKIP, timeout=400,
    )  # fmt: skip
    attempts = [p for p in (launcher.prefix / ".tmp").glob("ttl=*/marker/rl/*/attempts/*") if p.is_dir()]
    assert len(attempts) == 1, done.stdout + done.stderr
    run = GangRun(launcher, done.returncode, done.stdout + done.stderr, attempts[0])
    try:
        yield run
    finally:
        backend = launcher.backend()
        for job in backend.list_jobs():
            if not job.state.terminal:
                backend.cancel(job.job_id, reason="test teardown")
        for attempt in [run.attempt, *run.derived]:
            clean_up(attempt)


def derived_document(run: GangRun, attempt_id: str, scenario: str = "ok", **ray: int) -> Path:
    """The successful run's resolved document for another attempt, with its own port and timeouts."""
    doc = yaml.safe_load((run.attempt / "resolved-launch.yaml").read_text())
    doc["run"]["attempt_id"] = attempt_id
    doc["ray"].update(port=free_port(), **ray)
    doc["skyrl"]["environment"]["env_class"] = scenario
    path = run.prefix / f"{attempt_id}.yaml"
    path.write_text(yaml.safe_dump(doc))
    run.derived.append(attempt_of(run, attempt_id))
    return path


def attempt_of(run: GangRun, attempt_id: str) -> Path:
    return run.attempt.parent / attempt_id


def run_rank(run: GangRun, document: Path, rank: int, world: int, timeout: float = 180) -> tuple[int, str]:
    """One rank of the gang's task bootstrap, as the local backend would start it."""
    env = {"RLAUNCH_REPLICA_RANK": str(rank), "RLAUNCH_WORLD_SIZE": str(world), "RLAUNCH_BACKEND": "local"}
    done = run.launcher.run("-m", "rlaunch.task", "--config", str(document), env=env, timeout=timeout)
    return done.returncode, done.stdout + done.stderr


def test_two_nodes_join_one_cluster_and_the_driver_places_tasks_on_both(gang_run: GangRun) -> None:
    assert gang_run.returncode == 0, gang_run.output
    spread = json.loads((gang_run.attempt / "ray_spread.json").read_text())
    assert sorted(t["rank"] for t in spread["tasks"]) == ["0", "1"]  # one task on each node's raylet
    assert len({t["node_id"] for t in spread["tasks"]}) == 2
    assert all(t["gpu_ids"] for t in spread["tasks"])  # each held its node's logical GPU

    head = json.loads((gang_run.attempt / "rendezvous" / "head.json").read_text())
    outcome = json.loads((gang_run.attempt / "rendezvous" / "outcome.json").read_text())
    assert head["num_nodes"] == 2 and head["ray_version"] and head["python_version"]
    assert outcome == {**outcome, "gang_epoch": head["gang_epoch"], "state": "succeeded", "exit_code": 0}
    nodes = node_records(gang_run.attempt)
    assert nodes[1]["state"] == "left" and nodes[1]["gang_epoch"] == head["gang_epoch"]
    assert {nodes[0]["address"], nodes[1]["address"]} == {"127.0.0.1", "127.0.0.2"}
    assert nodes[0]["ray_pids"] and nodes[1]["ray_pids"]
    assert ray_leftovers(gang_run.attempt) == []
    for rank in (0, 1):  # Ray's logs were copied to the attempt's durable log dir
        (logs,) = (gang_run.attempt / "ray-logs").glob(f"rank-{rank}-*")
        assert (logs / "ray-start.log").read_text().count("Ray runtime started") == 1
        assert any((logs / "session").glob("raylet.out"))

    record = json.loads((gang_run.prefix / "marker" / "rl" / VERSION / "run_record.json").read_text())
    assert [a["state"] for a in record["attempts"]] == ["succeeded"]


def test_head_fails_after_the_join_timeout_naming_the_missing_rank(gang_run: GangRun) -> None:
    document = derived_document(gang_run, "nojoin000001", cluster_join_timeout_seconds=3)
    code, output = run_rank(gang_run, document, rank=0, world=2)
    attempt = attempt_of(gang_run, "nojoin000001")
    assert code == 1, output
    assert "waited 3s (ray.cluster_join_timeout_seconds) for 2 Ray nodes; rank(s) 1 never joined" in output
    outcome = json.loads((attempt / "rendezvous" / "outcome.json").read_text())
    assert outcome["state"] == "failed" and "rank(s) 1 never joined" in outcome["reason"]
    assert ray_leftovers(attempt) == []


def test_a_worker_refuses_a_version_skew_naming_both_nodes(gang_run: GangRun) -> None:
    document = derived_document(gang_run, "skew00000001", rendezvous_timeout_seconds=30)
    store = StorageRendezvous(str(attempt_of(gang_run, "skew00000001") / "rendezvous"))
    store.publish_head(
        HeadRecord(
            gang_epoch="other-node", attempt_id="skew00000001", job_id=None, head_host="head-node-a",
            address="127.0.0.1", port=free_port(), num_nodes=2, python_version="3.99.1", ray_version="9.9.9",
            written_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        )
    )  # fmt: skip
    code, output = run_rank(gang_run, document, rank=1, world=2)
    assert code == 1, output
    mine = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    assert f"version skew: rank 1 ({socket.gethostname()}) has Python {mine} and Ray " in output
    assert "the head, rank 0 (head-node-a), has Python 3.99.1 and Ray 9.9.9" in output
    assert "starting Ray" not in output
    assert node_records(attempt_of(gang_run, "skew00000001"))[1]["state"] == "refused"


def test_a_stale_head_record_of_an_earlier_gang_is_ignored(gang_run: GangRun) -> None:
    document = derived_document(gang_run, "stale0000001", rendezvous_timeout_seconds=2)
    store = StorageRendezvous(str(attempt_of(gang_run, "stale0000001") / "rendezvous"))
    store.publish_head(
        HeadRecord(
            gang_epoch="earlier", attempt_id="stale0000001", job_id=None, head_host="gone", address="127.0.0.1",
            port=free_port(), num_nodes=2, python_version="3.11.7", ray_version="2.60.0",
            written_at="2026-01-01T00:00:00.000+00:00",
        )
    )  # fmt: skip
    code, output = run_rank(gang_run, document, rank=1, world=2)
    assert code == 1, output
    assert "rank 1 waited 2s (ray.rendezvous_timeout_seconds)" in output and "rank 0 is missing" in output
    assert "starting Ray" not in output  # it never tried to join the earlier gang's head


def test_the_liveness_watchdog_kills_a_silent_driver_and_stops_ray(gang_run: GangRun) -> None:
    document = derived_document(gang_run, "silent000001", "silent", driver_liveness_timeout_seconds=4)
    code, output = run_rank(gang_run, document, rank=0, world=1)
    attempt = attempt_of(gang_run, "silent000001")
    assert code == 124, output
    assert "the trainer driver printed nothing for" in output and "driver_liveness_timeout_seconds=4" in output
    outcome = json.loads((attempt / "rendezvous" / "outcome.json").read_text())
    assert outcome["state"] == "timed_out" and outcome["exit_code"] == 124
    assert ray_leftovers(attempt) == []
    assert not _mentioning("rlaunch_test_marker.ray_driver --config " + str(gang_run.prefix))


def test_killing_a_worker_mid_run_fails_the_run_and_stops_every_ray_process(gang_run: GangRun) -> None:
    document = derived_document(gang_run, "kill00000001", "slow")
    backend = gang_run.launcher.backend()
    env = {k: v for k, v in gang_run.launcher.env.items() if k.startswith("RLAUNCH_") or k == "PYTHONPATH"}
    job_id = backend.submit(
        JobSpec(
            name="kill-worker",
            argv=(sys.executable, "-m", "rlaunch.task", "--config", str(document)),
            env=env,
            working_dir=str(REPO),
            replicas=2,
        )
    )
    attempt = attempt_of(gang_run, "kill00000001")
    deadline = time.monotonic() + 240
    while not (attempt / "ray_spread.json").exists():  # the driver has placed its tasks on both nodes
        assert not backend.status(job_id).state.terminal, "\n".join(backend.logs(job_id))
        assert time.monotonic() < deadline, "\n".join(backend.logs(job_id))
        time.sleep(0.5)
    worker = node_records(attempt)[1]
    os.kill(worker["pid"], signal.SIGKILL)
    status = backend.wait(job_id, timeout=120)
    assert status.state == JobState.FAILED
    assert "replica 1 failed: exit code -9" in (status.message or "")
    outcome = json.loads((attempt / "rendezvous" / "outcome.json").read_text())
    assert outcome["state"] == "terminated" and "rank 0 received SIGTERM" in outcome["reason"]
    assert ray_leftovers(attempt) == []
