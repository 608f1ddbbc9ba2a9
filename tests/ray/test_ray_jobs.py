"""The Ray backend against a real local Ray cluster: submission and replay, gangs with ranks and
a rendezvous, retries, failures and timeouts, logs, cancel cascades, capacity refusals, and
status read from other processes."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from ray_clusters import CLUSTER_ONLY_VARIABLE, RayCluster
from ray_helpers import pid_alive, py, ray_job_record, read_pids, wait_for

from rlaunch.cluster.protocol import CapacityError, JobSpec, JobState, Resources
from tests.support.polling import HANDSHAKE

pytestmark = pytest.mark.ray


def test_entrypoint_job_replays_its_argv_with_entrypoint_resources_and_an_isolated_env(
    backend, ray_env: RayCluster, tmp_path: Path
) -> None:
    code = """
        import json, os, sys
        print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}))
    """
    spec = JobSpec(
        name="coordinator-replay",
        argv=(*py(code), "--flag", "two words", "it's"),
        env={"MY_SETTING": "x", "WANDB_API_KEY": "wandb-secret-123456"},
        working_dir=str(tmp_path),
        resources=Resources(cpu=1, memory_bytes=10**9),
        labels={"rlaunch.kind": "coordinator"},
    )
    job_id = backend.submit(spec)
    status = backend.wait(job_id, timeout=90)
    assert status.state == JobState.SUCCEEDED, status
    # The rlaunch job id is Ray's submission id; the entrypoint is the driver, then the argv as given.
    info = backend.client.get_job_info(job_id)
    assert info.submission_id == job_id and job_id.startswith("coordinator-replay-")
    entrypoint = shlex.split(info.entrypoint)
    assert entrypoint[1:4] == ["-m", "rlaunch.cluster.ray.job_driver", "--"] and entrypoint[4:] == list(spec.argv)
    recorded = ray_job_record(ray_env.gcs, job_id)
    assert recorded["entrypoint_num_cpus"] == 1 and recorded["entrypoint_memory"] == 10**9
    # The replica saw its argv, the spec's working dir and only allow-listed variables + spec.env + RLAUNCH_*.
    (line,) = backend.logs(job_id, replica=0)
    seen = json.loads(line)
    assert seen["argv"] == ["--flag", "two words", "it's"]
    assert seen["cwd"] == str(tmp_path)
    env = seen["env"]
    assert env["MY_SETTING"] == "x"
    assert env["WANDB_API_KEY"] == "<redacted>"  # it reached the replica, and was redacted from the log
    assert env["RLAUNCH_JOB_ID"] == job_id and env["RLAUNCH_BACKEND"] == "ray"
    assert env["RLAUNCH_REPLICA_RANK"] == "0" and env["RLAUNCH_WORLD_SIZE"] == "1"
    assert env["RLAUNCH_RENDEZVOUS"].rpartition(":")[2].isdigit()
    assert env["RLAUNCH_RAY_ADDRESS"] == ray_env.dashboard and env["RLAUNCH_RAY_GCS_ADDRESS"]
    assert CLUSTER_ONLY_VARIABLE not in env, "the Ray worker's environment leaked into the replica"
    assert not [k for k in env if k.startswith("RAY_")], "Ray's own variables leaked into the replica"
    assert "wandb-secret-123456" not in backend.client.get_job_logs(job_id)
    # Status: one replica, one attempt, exit 0; name, labels and times from the job's record.
    assert status.name == "coordinator-replay" and status.labels == {"rlaunch.kind": "coordinator"}
    assert [(r.rank, r.state, r.attempts, r.exit_code) for r in status.replicas] == [(0, JobState.SUCCEEDED, 1, 0)]
    assert status.submitted_at and status.started_at and status.finished_at and status.parent is None
    assert job_id in [s.job_id for s in backend.list_jobs()]


GANG = """
import os, pathlib, sys
rank = int(os.environ["RLAUNCH_REPLICA_RANK"])
world = int(os.environ["RLAUNCH_WORLD_SIZE"])
host, port = os.environ["RLAUNCH_RENDEZVOUS"].rsplit(":", 1)
print(f"rank {{rank}} of {{world}} rendezvous {{host}}:{{port}}", flush=True)
if rank == 1 and not pathlib.Path({marker!r}).exists():
    pathlib.Path({marker!r}).touch()
    print("rank 1 fails its first attempt", flush=True)
    sys.exit(3)
heard = handshake(60)
if heard is not None:
    print("rank 0 heard:", heard, flush=True)
"""


def test_two_replica_gang_gets_ranks_a_shared_rendezvous_and_per_replica_retries(backend, tmp_path: Path) -> None:
    spec = JobSpec(
        name="gang",
        argv=py(HANDSHAKE + GANG.format(marker=str(tmp_path / "failed-once"))),
        replicas=2,
        max_retries=1,
        resources=Resources(cpu=1),
    )
    job_id = backend.submit(spec)
    status = backend.wait(job_id, timeout=120)
    assert status.state == JobState.SUCCEEDED, (status, backend.client.get_job_logs(job_id))
    assert [(r.rank, r.state, r.attempts, r.exit_code) for r in status.replicas] == [
        (0, JobState.SUCCEEDED, 1, 0),
        (1, JobState.SUCCEEDED, 2, 0),
    ]
    rank0, rank1 = list(backend.logs(job_id, replica=0)), list(backend.logs(job_id, replica=1))
    assert rank0[0].startswith("rank 0 of 2 rendezvous ") and rank0[-1] == "rank 0 heard: hello from rank 1"
    assert rank1 == [
        rank0[0].replace("rank 0", "rank 1", 1),
        "rank 1 fails its first attempt",
        rank0[0].replace("rank 0", "rank 1", 1),
    ]
    everything = list(backend.logs(job_id))
    assert "[rlaunch] rank 1 attempt 1 failed (exit code 3); retrying" in everything
    assert everything[-1] == "[rlaunch] job succeeded"
    assert list(backend.logs(job_id, tail=1)) == ["[rlaunch] job succeeded"]
    with pytest.raises(ValueError, match="no replica 2"):
        backend.logs(job_id, replica=2)


def test_failures_timeouts_and_status_seen_from_anywhere(
    backend, ray_env: RayCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    failing = backend.submit(JobSpec(name="fails", argv=py("import sys; print('boom'); sys.exit(3)"), max_retries=1))
    slow = backend.submit(
        JobSpec(name="slow", argv=py("import time; print('sleeping', flush=True); time.sleep(120)"), timeout_seconds=3)
    )
    failed = backend.wait(failing, timeout=90)
    assert failed.state == JobState.FAILED
    assert failed.message == "replica 0 failed: exit code 3 on attempt 2 of 2; stopped the other replicas"
    assert [(r.state, r.attempts, r.exit_code) for r in failed.replicas] == [(JobState.FAILED, 2, 3)]
    assert list(backend.logs(failing, replica=0)) == ["boom", "boom"]
    timed_out = backend.wait(slow, timeout=90)
    assert timed_out.state == JobState.FAILED and timed_out.message.startswith("timed out after 3s")
    assert timed_out.replicas[0].exit_code == 143  # SIGTERM, as a shell reports it

    # Status is whatever the cluster holds: a backend that shares nothing with the submitter sees it.
    from rlaunch.cluster.ray.backend import RayBackend

    monkeypatch.delenv("RLAUNCH_RAY_GCS_ADDRESS")
    monkeypatch.delenv("RAY_ADDRESS")
    # Given the GCS address, it sees everything, replicas included.
    full = RayBackend(ray_env.gcs).status(failing)
    assert (full.state, full.message) == (JobState.FAILED, failed.message)
    assert [(r.attempts, r.exit_code) for r in full.replicas] == [(2, 3)]
    # Given only the dashboard, it still gets the job's state and the driver's reason (from Ray's message).
    dashboard_only = RayBackend(ray_env.dashboard).status(failing)
    assert (dashboard_only.state, dashboard_only.message) == (JobState.FAILED, failed.message)
    assert dashboard_only.replicas[0].state == JobState.FAILED


def test_logs_follow_a_running_job_and_end_when_it_does(backend, tmp_path: Path) -> None:
    go = tmp_path / "go"
    code = f"""
        import os, time
        print("first", flush=True)
        while not os.path.exists({str(go)!r}):
            time.sleep(0.05)
        print("second", flush=True)
        print("third", flush=True)
    """
    job_id = backend.submit(JobSpec(name="follow", argv=py(code)))
    wait_for(lambda: "[rank 0] first" in backend.client.get_job_logs(job_id), what="the first line")
    followed = backend.logs(job_id, replica=0, follow=True, tail=1)
    assert next(followed) == "first"
    go.touch()
    assert list(followed) == ["second", "third"]  # and the iterator ended: the job is over
    assert backend.status(job_id).state == JobState.SUCCEEDED
    assert list(backend.logs(job_id, tail=2)) == ["[rank 0] third", "[rlaunch] job succeeded"]
    assert [line for line in backend.logs(job_id, follow=True) if line.startswith("[rank")] == [
        "[rank 0] first",
        "[rank 0] second",
        "[rank 0] third",
    ]


CHILD = """
    import os, subprocess, sys, time
    rank = os.environ["RLAUNCH_REPLICA_RANK"]
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    with open({pids!r} + rank, "w") as handle:
        handle.write(f"{{os.getpid()}}\\n{{grandchild.pid}}\\n")
    print("child replica", rank, "ready", flush=True)
    time.sleep(300)
"""

PARENT = """
    import os, sys, time
    from rlaunch.cluster.protocol import JobSpec, Resources, backend_from_env
    backend = backend_from_env()
    child = backend.submit_child(JobSpec(name="child", argv=(sys.executable, "-c", {child!r}), replicas=2, resources=Resources(cpu=0.5)))
    print("child", child, flush=True)
    while not all(os.path.exists({pids!r} + str(rank)) for rank in (0, 1)):
        time.sleep(0.1)
    print("children ready", flush=True)
    if {linger}:
        time.sleep(300)
"""


def _submit_parent(backend, pids: str, *, linger: bool) -> str:
    import textwrap

    code = PARENT.format(child=textwrap.dedent(CHILD.format(pids=pids)), pids=pids, linger=linger)
    return backend.submit(JobSpec(name="parent", argv=py(code), resources=Resources(cpu=1)))


def _children_ready(backend, parent: str, pids: str) -> tuple[str, list[int]]:
    wait_for(
        lambda: "[rank 0] children ready" in backend.client.get_job_logs(parent),
        timeout=120,
        what="the child's replicas",
    )
    (child,) = backend.status(parent).children
    replica_pids = [pid for rank in (0, 1) for pid in read_pids(Path(f"{pids}{rank}"))]
    assert len(replica_pids) == 4  # each replica and its grandchild
    return child, replica_pids


def test_cancel_cascades_to_child_jobs_and_no_child_outlives_its_parent(backend, tmp_path: Path) -> None:
    """Two coordinator-shaped parents, each with a 2-replica child gang (replicas start a grandchild):
    one is cancelled (its child follows), the other succeeds (its child is stopped with it)."""
    cancelled_pids, finished_pids = str(tmp_path / "a-"), str(tmp_path / "b-")
    lingering = _submit_parent(backend, cancelled_pids, linger=True)
    finishing = _submit_parent(backend, finished_pids, linger=False)
    child, replica_pids = _children_ready(backend, lingering, cancelled_pids)
    assert all(pid_alive(p) for p in replica_pids)
    child_status = backend.status(child)
    assert child_status.parent == lingering and child_status.state == JobState.RUNNING
    assert [r.state for r in child_status.replicas] == [JobState.RUNNING, JobState.RUNNING]

    cancelled = backend.cancel(lingering, reason="operator asked")
    assert cancelled.state == JobState.CANCELLED and cancelled.message.endswith(": operator asked")
    assert cancelled.children == (child,)
    child_status = backend.status(child)
    assert child_status.state == JobState.CANCELLED
    assert child_status.message.endswith(f"parent job {lingering} was cancelled: operator asked")
    assert [r.state for r in child_status.replicas] == [JobState.CANCELLED, JobState.CANCELLED]
    wait_for(
        lambda: not any(pid_alive(p) for p in replica_pids), timeout=20, what="the child's replica processes to stop"
    )
    assert backend.cancel(lingering).state == JobState.CANCELLED  # idempotent on a terminal job

    orphan, orphan_pids = _children_ready(backend, finishing, finished_pids)
    assert backend.wait(finishing, timeout=60).state == JobState.SUCCEEDED
    orphan_status = backend.wait(orphan, timeout=60)
    assert orphan_status.state == JobState.CANCELLED
    assert orphan_status.message.endswith(f"parent job {finishing} ended (succeeded)")
    wait_for(
        lambda: not any(pid_alive(p) for p in orphan_pids), timeout=20, what="the orphaned child's processes to stop"
    )


def test_a_plan_that_can_never_fit_is_refused_before_submission(backend) -> None:
    before = len(backend.client.list_jobs())
    too_wide = JobSpec(name="wide", argv=("true",), replicas=2, resources=Resources(cpu=64))
    with pytest.raises(CapacityError) as refused:
        backend.submit(too_wide)
    text = str(refused.value)
    assert "CPU: each replica needs 64 but the largest node offers 4" in text and "nothing was submitted" in text
    with pytest.raises(CapacityError, match=r"memory: each replica needs 64GB but the largest node offers 8GB"):
        backend.submit(JobSpec(name="fat", argv=("true",), resources=Resources(cpu=1, memory_bytes=64 * 10**9)))
    with pytest.raises(CapacityError, match=r"GPU: each replica needs 8 but the largest node offers 0"):
        backend.check(
            JobSpec(
                name="gpus",
                argv=("true",),
                replicas=2,
                resources=Resources(cpu=1, accelerators=8, accelerator_type="H100"),
            )
        )
    with pytest.raises(CapacityError, match=r"CPU: 5 replicas need 5 \(1 each\) but the cluster has 4 in total"):
        backend.submit(JobSpec(name="many", argv=("true",), replicas=5, resources=Resources(cpu=1)))
    from rlaunch.cluster.ray.backend import RayBackend

    spread = RayBackend(strategy="STRICT_SPREAD")
    with pytest.raises(CapacityError, match="STRICT_SPREAD puts each replica on its own node, so it needs 2 nodes"):
        spread.submit(JobSpec(name="spread", argv=("true",), replicas=2, resources=Resources(cpu=1)))
    assert backend.check(JobSpec(name="fits", argv=("true",), replicas=2, resources=Resources(cpu=2))) == "PACK"
    # Before a coordinator is submitted: its child gang must fit beside the coordinator's own resources.
    gang = JobSpec(name="gang", argv=("true",), replicas=4, resources=Resources(cpu=1))
    with pytest.raises(
        CapacityError, match=r"CPU: 4 replicas need 4 \(1 each\) but the cluster has 3 in total after what its parent"
    ):
        backend.check(gang, beside=Resources(cpu=1))
    assert (
        backend.check(
            JobSpec(name="gang", argv=("true",), replicas=3, resources=Resources(cpu=1)), beside=Resources(cpu=1)
        )
        == "PACK"
    )
    assert len(backend.client.list_jobs()) == before, "a refused job reached the cluster"
