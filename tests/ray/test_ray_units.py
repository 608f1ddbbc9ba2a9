"""The Ray backend's parts that need no cluster: capacity arithmetic, the missing-extra error,
options forwarded into jobs, the execution's placement, state mapping, and the keeper that stops
a replica's whole process group however its starter ends."""

from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from ray_clusters import RAY_MISSING, ray_importable
from ray_helpers import pid_alive, read_pids, wait_for

from rlaunch.cluster.protocol import CapacityError, JobSpec, JobState, Resources
from rlaunch.cluster.ray.capacity import Node, auto_strategy, bundle_for, check_fits, check_fits_beside
from rlaunch.cluster.ray.replica import replica_environment, run_attempt
from rlaunch.names import MAX_JOB_NAME
from rlaunch.skyrl import RaySkyRLExecution

needs_ray = pytest.mark.skipif(not ray_importable(), reason=RAY_MISSING)
REPO = Path(__file__).resolve().parents[2]


def nodes(*cpus: float, memory: float = 16e9, gpus: float = 0, kind: str | None = None) -> list[Node]:
    extra = {"GPU": gpus} if gpus else {}
    if kind:
        extra[f"accelerator_type:{kind}"] = 1.0
    return [
        Node(f"node{i}", f"10.0.0.{i}", {"CPU": c, "memory": memory, **extra}, is_head=i == 0)
        for i, c in enumerate(cpus)
    ]


def spec(replicas: int = 1, **resources: object) -> JobSpec:
    return JobSpec(name="job", argv=("true",), replicas=replicas, resources=Resources(**resources))  # type: ignore[arg-type]


# -- capacity -----------------------------------------------------------------------------------


def test_auto_spreads_over_nodes_when_there_are_enough_and_packs_on_one_node_otherwise() -> None:
    assert check_fits(spec(2, cpu=1), nodes(4)).strategy == "PACK"
    assert check_fits(spec(2, cpu=2), nodes(4, 4, 4)).strategy == "STRICT_SPREAD"
    assert check_fits(spec(1, cpu=2), nodes(4, 4)).strategy == "PACK"
    assert check_fits(spec(3, cpu=2), nodes(4, 4)).strategy == "PACK"  # 2 nodes for 3 replicas: packed 2 + 1
    assert auto_strategy(spec(2, cpu=1), nodes(1, 1)) == "STRICT_SPREAD"
    assert bundle_for(Resources(cpu=2, memory_bytes=10**9, accelerators=8, accelerator_type="H100")) == {
        "CPU": 2.0,
        "memory": 1e9,
        "GPU": 8.0,
        "accelerator_type:H100": 0.001,
    }


def test_refusals_name_every_missing_resource() -> None:
    with pytest.raises(CapacityError) as refused:
        check_fits(
            spec(2, cpu=8, memory_bytes=64 * 10**9, accelerators=8, accelerator_type="H100"),
            nodes(4, 4),
            cluster="the Ray cluster at X",
        )
    text = str(refused.value)
    assert "does not fit the Ray cluster at X" in text
    assert "CPU: each replica needs 8 but the largest node offers 4" in text
    assert "memory: each replica needs 64GB but the largest node offers 16GB" in text
    assert "GPU: each replica needs 8 but the largest node offers 0" in text
    assert "accelerator type H100: no node has it" in text
    assert "alive nodes: 10.0.0.0 (head): 4 CPU, 16GB memory; 10.0.0.1: 4 CPU, 16GB memory" in text
    assert "check_capacity=False" in text
    with pytest.raises(CapacityError, match=r"CPU: 3 replicas need 6 \(2 each\) but the cluster has 4 in total"):
        check_fits(spec(3, cpu=2), nodes(4))
    with pytest.raises(CapacityError, match="at most 2 of 3 replicas fit"):
        check_fits(spec(3, cpu=2), nodes(3, 3))
    with pytest.raises(CapacityError, match="STRICT_SPREAD puts each replica on its own node, so it needs 3 nodes"):
        check_fits(spec(3, cpu=1), nodes(8, 8), strategy="STRICT_SPREAD")
    with pytest.raises(CapacityError, match="STRICT_PACK puts all 2 replicas on one node"):
        check_fits(spec(2, cpu=3), nodes(4, 4), strategy="STRICT_PACK")
    with pytest.raises(CapacityError, match="the cluster has no alive nodes"):
        check_fits(spec(1), [])
    assert (
        check_fits(spec(2, cpu=1, accelerators=1, accelerator_type="A100"), nodes(4, 4, gpus=1, kind="A100")).strategy
        == "STRICT_SPREAD"
    )


def test_what_the_parent_jobs_hold_is_not_available_to_their_child() -> None:
    reserved = {"node0": {"CPU": 1.0}}
    assert check_fits(spec(3, cpu=1), nodes(4), reserved=reserved).strategy == "PACK"
    with pytest.raises(CapacityError, match="CPU: 4 replicas need 4 .* 3 in total after what its parent jobs hold"):
        check_fits(spec(4, cpu=1), nodes(4), reserved=reserved)


def test_a_child_must_fit_beside_the_coordinator_that_waits_for_it() -> None:
    assert check_fits_beside(spec(3, cpu=1), Resources(cpu=1), nodes(4)).strategy == "PACK"
    with pytest.raises(CapacityError, match="4 replicas need 4 .* 3 in total after what its parent jobs hold"):
        check_fits_beside(spec(4, cpu=1), Resources(cpu=1), nodes(4))
    assert check_fits_beside(spec(2, cpu=2), Resources(cpu=2), nodes(4, 4)).strategy == "STRICT_SPREAD"
    with pytest.raises(CapacityError, match="job-coordinator"):
        check_fits_beside(spec(1), Resources(cpu=8), nodes(4))


def test_a_coordinator_beside_a_child_of_the_longest_name_is_refused_for_capacity_not_its_name() -> None:
    """The coordinator's spec is named after its child's: a child of the longest job name (63) still
    gets the capacity refusal, not a name one (the coordinator's name is cut to the limit)."""
    child = JobSpec(name="c" * MAX_JOB_NAME, argv=("-",))
    with pytest.raises(CapacityError, match=f"{'c' * MAX_JOB_NAME}\\b"):
        check_fits_beside(child, Resources(cpu=8), nodes(4))


# -- the extra ----------------------------------------------------------------------------------


def test_choosing_the_ray_backend_without_ray_names_the_extra(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["ray"] = None  # as if ray were not installed
        import rlaunch, rlaunch.cluster.ray.backend  # importing the backend module is fine
        from rlaunch.cluster.protocol import get_backend
        try:
            get_backend("ray", address="http://127.0.0.1:8265")
        except ImportError as exc:
            print(type(exc).__name__, exc)
        else:
            raise SystemExit("no error")
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLAUNCH_", "RAY_"))}
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("RayNotInstalledError ")
    assert "pip install 'rlaunch[ray]'" in done.stdout


# -- options travel into jobs ------------------------------------------------------------------


@needs_ray
def test_a_job_rebuilds_the_backend_that_started_it_from_its_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlaunch.cluster.ray.backend import RayBackend

    for name in [k for k in os.environ if k.startswith(("RLAUNCH_", "RAY_"))]:
        monkeypatch.delenv(name)
    original = RayBackend(
        "http://head:8265",
        gcs_address="head:6379",
        working_dir="gcs://_ray_pkg_abc.zip",
        excludes=("*.bin",),
        py_executable="/opt/venv/bin/python",
        pip=("rlaunch[ray]==0.1.0",),
        strategy="SPREAD",
        check_capacity=False,
        kill_grace=2.5,
        priority="batch",
    )
    env = original.environment()
    assert env["RLAUNCH_BACKEND"] == "ray" and env["RLAUNCH_RAY_ADDRESS"] == "http://head:8265"
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    rebuilt = RayBackend.from_env()
    fields = (
        "address",
        "gcs_address",
        "working_dir",
        "excludes",
        "py_executable",
        "pip",
        "strategy",
        "check_capacity",
        "kill_grace",
        "priority",
    )
    assert {f: getattr(rebuilt, f) for f in fields} == {f: getattr(original, f) for f in fields}
    assert rebuilt._jobs_address == "head:6379"  # inside the cluster, through the GCS (valid on every node)
    assert rebuilt.environment() == env


@needs_ray
def test_the_interpreter_and_runtime_env_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rlaunch.cluster.ray.backend import RayBackend

    monkeypatch.chdir(tmp_path)
    argv = (sys.executable, "-m", "pkg.main", "--x")
    same_image = RayBackend("http://h:8265", working_dir=".", excludes=(".git",))
    assert same_image._cluster_argv(argv) == list(argv)
    assert same_image._runtime_env(spec()) == {"working_dir": str(tmp_path), "excludes": [".git"]}
    pinned = RayBackend("http://h:8265", py_executable="/opt/venv/bin/python")
    assert pinned._cluster_argv(argv) == ["/opt/venv/bin/python", *argv[1:]]
    assert pinned._runtime_env(spec()) == {"py_executable": "/opt/venv/bin/python"}
    with_pip = RayBackend("http://h:8265", pip=("rlaunch[ray]",), working_dir="gcs://_ray_pkg_1.zip")
    assert with_pip._cluster_argv(argv)[0] == "python"
    assert with_pip._runtime_env(spec()) == {"working_dir": "gcs://_ray_pkg_1.zip", "pip": ["rlaunch[ray]"]}
    with pytest.raises(ValueError, match="is not a directory"):
        RayBackend("http://h:8265", working_dir="missing")._runtime_env(spec())


@needs_ray
def test_bad_addresses_and_owned_variables_are_refused_before_contacting_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rlaunch.cluster.ray.backend import RayBackend, RayClusterUnreachableError
    from tests.support.live_clusters import free_port

    for name in [k for k in os.environ if k.startswith(("RLAUNCH_", "RAY_"))]:
        monkeypatch.delenv(name)
    with pytest.raises(ValueError, match="needs the cluster's address"):
        RayBackend()
    with pytest.raises(ValueError, match="Ray Client address"):
        RayBackend("ray://head:10001")
    with pytest.raises(ValueError, match="strategy="):
        RayBackend("http://h:8265", strategy="pack")
    backend = RayBackend(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ValueError, match=r"sets \['RLAUNCH_JOB_ID'\], which the ray backend sets"):
        backend.submit(JobSpec(name="x", argv=("true",), env={"RLAUNCH_JOB_ID": "mine"}))
    with pytest.raises(RayClusterUnreachableError, match="cannot reach the Ray cluster at http://127.0.0.1:"):
        backend.submit(JobSpec(name="x", argv=("true",)))


@needs_ray
def test_status_falls_back_on_what_ray_knows_when_the_driver_could_not_record_it() -> None:
    from rlaunch.cluster.ray.backend import RayBackend, _outcome_line

    backend = RayBackend("http://h:8265")  # no GCS address: no KV, nothing contacted

    def info(status: str, code: int | None = None, message: str | None = None) -> SimpleNamespace:
        return SimpleNamespace(
            status=SimpleNamespace(value=status), driver_exit_code=code, message=message, submission_id="j"
        )

    failed = "Job entrypoint command failed with exit code 1, last available logs:\n[rank 0] boom\n[rlaunch] job failed: replica 0 failed: exit code 3"
    assert _outcome_line(failed) == "replica 0 failed: exit code 3"
    assert backend._state(info("FAILED", 1, failed), None, False) == (JobState.FAILED, "replica 0 failed: exit code 3")
    assert backend._state(info("FAILED", 75, "[rlaunch] job cancelled: parent job p ended (failed)"), None, False) == (
        JobState.CANCELLED,
        "parent job p ended (failed)",
    )
    assert backend._state(info("STOPPED"), None, False) == (JobState.CANCELLED, "stopped through the Ray Jobs API")
    assert backend._state(info("FAILED", 2, "Traceback ... ModuleNotFoundError"), None, False)[0] == JobState.FAILED
    assert backend._state(info("RUNNING"), None, False) == (JobState.RUNNING, None)
    assert backend._state(info("RUNNING"), None, True) == (
        JobState.PENDING,
        None,
    )  # the driver has not started the gang yet
    assert backend._state(info("PENDING"), None, True) == (JobState.PENDING, None)
    recorded = {"state": "running", "message": None}
    assert backend._state(info("RUNNING"), recorded, True) == (JobState.RUNNING, None)
    assert backend._state(info("STOPPED"), recorded, True)[0] == JobState.CANCELLED
    done = {"state": "succeeded", "message": None}
    assert backend._state(info("RUNNING"), done, True) == (JobState.SUCCEEDED, None)


# -- the execution ------------------------------------------------------------------------------


def test_the_ray_execution_places_jobs_through_the_backend_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RAY_ADDRESS", "RLAUNCH_RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    execution = RaySkyRLExecution(cpu=2.0, memory="8GB", disk="20GB", pip=["rlaunch[ray]"], priority="batch")  # type: ignore[arg-type]
    assert execution.pip == ("rlaunch[ray]",)
    assert execution.route() == ("ray", None)
    with pytest.raises(ValueError, match=r"needs address=\.\.\. or \$RAY_ADDRESS"):
        execution.placement()
    monkeypatch.setenv("RLAUNCH_RAY_ADDRESS", "10.0.0.1:6379")  # what a job on the cluster sees
    assert execution.placement()["address"] == "10.0.0.1:6379"
    monkeypatch.setenv("RAY_ADDRESS", "http://head:8265")
    placement = execution.placement()
    assert placement == {
        "address": "http://head:8265",
        "working_dir": ".",
        "excludes": [".git", ".venv", "rlaunch-artifacts", "__pycache__", "*.png"],
        "py_executable": None,
        "pip": ["rlaunch[ray]"],
        "strategy": "auto",
        "check_capacity": True,
        "priority": "batch",
    }
    json.dumps(placement)  # it is written into the launch document
    if ray_importable():
        from rlaunch.cluster.ray.backend import RayBackend

        assert set(placement) <= set(inspect.signature(RayBackend).parameters)
    with pytest.raises(ValueError, match="Ray Client address"):
        RaySkyRLExecution(cpu=1.0, memory="1GB", disk="1GB", address="ray://head:10001")
    with pytest.raises(ValueError, match="strategy="):
        RaySkyRLExecution(cpu=1.0, memory="1GB", disk="1GB", strategy="spread")
    with pytest.raises(TypeError, match="excludes must be a tuple of strings"):
        RaySkyRLExecution(cpu=1.0, memory="1GB", disk="1GB", excludes=".git")  # type: ignore[arg-type]


# -- the keeper ---------------------------------------------------------------------------------

REPLICA = """
import os, subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
with open({pids!r}, "w") as handle:
    handle.write(f"{{os.getpid()}}\\n{{grandchild.pid}}\\n")
print("rank", os.environ["RLAUNCH_REPLICA_RANK"], "secret", os.environ.get("TOKEN"), flush=True)
sys.stderr.write("to stderr\\n")
{then}
"""


def test_an_attempt_streams_its_output_and_leaves_nothing_behind(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    env = replica_environment(
        {"TOKEN": "t0k3n-value"}, rank=3, rendezvous="h:1", source={"PATH": os.environ["PATH"], "UNRELATED": "x"}
    )
    assert set(env) == {"PATH", "PYTHONUNBUFFERED", "TOKEN", "RLAUNCH_REPLICA_RANK", "RLAUNCH_RENDEZVOUS"}
    events = list(
        run_attempt([sys.executable, "-c", REPLICA.format(pids=str(pids), then="sys.exit(4)")], env, str(tmp_path), 1.0)
    )
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "started" and kinds[-1] == "exit" and events[-1][1] == 4
    lines = [line for kind, data in events if kind == "out" for line in data]
    assert lines == ["rank 3 secret t0k3n-value", "to stderr"]
    wait_for(
        lambda: not any(pid_alive(p) for p in read_pids(pids)), timeout=10, what="the replica's group to be stopped"
    )
    assert list(run_attempt(["/no/such/program"], env, None, 1.0))[-1] == ("exit", 127)


def test_a_stopped_attempt_stops_its_whole_group() -> None:
    stop_after = []
    events = run_attempt(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)"],
        {"PATH": os.environ["PATH"]},
        None,
        1.0,
        lambda: bool(stop_after),
    )
    for kind, data in events:
        if kind == "out":
            stop_after.append(True)
        if kind == "exit":
            assert data == 128 + signal.SIGTERM
            break


def test_the_keeper_stops_the_replica_when_its_starter_is_killed(tmp_path: Path) -> None:
    """What happens when Ray kills a worker (or the driver) outright: nothing of the attempt survives."""
    pids = tmp_path / "pids"
    starter_code = textwrap.dedent(
        f"""
        import os, sys
        from rlaunch.cluster.ray.replica import run_attempt
        replica = {REPLICA.format(pids=str(pids), then="import time; time.sleep(120)")!r}
        for kind, data in run_attempt([sys.executable, "-c", replica], {{"PATH": os.environ["PATH"], "RLAUNCH_REPLICA_RANK": "0"}}, None, 1.0):
            print(kind, data, flush=True)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    starter = subprocess.Popen(
        [sys.executable, "-c", starter_code], env=env, stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:
        replica_pids = wait_for(lambda: read_pids(pids), timeout=30, what="the replica to start")
        assert all(pid_alive(p) for p in replica_pids)
    finally:
        os.killpg(starter.pid, signal.SIGKILL)  # the starter's group only: the keeper left it
        starter.wait()
    wait_for(
        lambda: not any(pid_alive(p) for p in replica_pids), timeout=15, what="the keeper to stop the orphaned replica"
    )
