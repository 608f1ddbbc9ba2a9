"""The Iris backend against a real local Iris cluster: gangs, parent/child, retries, refusals.

Every job here is a real Iris job run by Iris's local workers (host processes); the fake `H100x8`
scale group gives GPU placement without GPUs.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlaunch.cluster.job_environment import job_environment
from rlaunch.cluster.protocol import CapacityError, JobSpec, JobState, Resources
from tests.iris.iris_cluster import CANARY, IrisCluster
from tests.support.polling import py, wait_for

pytestmark = pytest.mark.iris

H100X8 = Resources(cpu=2, memory_bytes=2 * 10**9, disk_bytes=10**9, accelerators=8, accelerator_type="H100")

# Rank 0 listens on the rendezvous port; rank 1 connects through the address it resolved from
# Iris's endpoint registry and sends a line. Both print what the wrapper gave them.
RENDEZVOUS_PROBE = """
import json, os, socket, time
rank = int(os.environ["RLAUNCH_REPLICA_RANK"])
host, port = os.environ["RLAUNCH_RENDEZVOUS"].rsplit(":", 1)
print("probe " + json.dumps({"rank": rank, "world": os.environ["RLAUNCH_WORLD_SIZE"],
      "job": os.environ["RLAUNCH_JOB_ID"], "rendezvous": os.environ["RLAUNCH_RENDEZVOUS"],
      "canary": os.environ.get("CANARY_NAME"), "cw": os.environ.get("CW_KEY_ID"), "hf": os.environ.get("HF_TOKEN")}), flush=True)
if rank == 0:
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", int(port)))
    server.listen(1)
    conn, _ = server.accept()
    print("rank 0 received: " + conn.recv(100).decode(), flush=True)
else:
    for _ in range(300):
        try:
            conn = socket.create_connection((host, int(port)))
            break
        except OSError:
            time.sleep(0.1)
    conn.sendall(b"hello from rank 1")
""".replace("CANARY_NAME", CANARY)


def test_two_node_gang_on_fake_h100x8_is_coscheduled_and_meets_through_the_endpoint_registry(
    backend, iris_env: IrisCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from iris.client import IrisClient
    from iris.cluster.types import JobName
    from iris.rpc import job_pb2

    from rlaunch.cluster.iris.backend import IrisBackend

    monkeypatch.setenv("CW_KEY_ID", "iris-would-forward-this")  # not on rlaunch's allow-list
    spec = JobSpec(
        name="gang",
        argv=py(RENDEZVOUS_PROBE),
        env={"HF_TOKEN": "hf_allowlisted_value"},
        resources=H100X8,
        replicas=2,
        max_retries=1,
        timeout_seconds=900,
    )
    batch = IrisBackend(cluster_config=str(iris_env.config), priority="batch", scheduling_timeout_seconds=120)
    job_id = batch.submit(spec)
    request = batch._request(job_id)  # what Iris was asked for
    assert request.priority_band == job_pb2.PRIORITY_BAND_BATCH
    assert (request.replicas, request.coscheduling.group_by) == (2, "device-variant")
    assert (request.max_retries_failure, request.max_task_failures) == (1, 2)  # both limits, per task and job
    assert (request.scheduling_timeout.milliseconds, request.timeout.milliseconds) == (120_000, 900_000)
    assert (request.resources.cpu_millicores, request.resources.memory_bytes) == (4000, 2 * 10**9)  # Iris floor
    assert list(request.ports) == ["rendezvous", "ray-head"]
    assert job_id.startswith("/") and JobName.from_wire(job_id).name.startswith("gang-")
    status = backend.wait(job_id, timeout=180)
    assert status.state is JobState.SUCCEEDED, (status, list(backend.logs(job_id)))
    assert [(r.rank, r.state, r.attempts) for r in status.replicas] == [
        (0, JobState.SUCCEEDED, 1),
        (1, JobState.SUCCEEDED, 1),
    ]

    def probes_of(lines: list[str]) -> dict[int, dict]:
        return {p["rank"]: p for p in (json.loads(line.split("probe ", 1)[1]) for line in lines if "probe {" in line)}

    # Iris ships task output to its log store asynchronously: the last lines may land after the end.
    def complete() -> list[str] | None:
        got = list(backend.logs(job_id))
        return got if len(probes_of(got)) == 2 and any("received" in line for line in got) else None

    lines = wait_for(complete, timeout=60, what="both ranks' log lines")
    probes = probes_of(lines)
    assert probes[0]["rendezvous"] == probes[1]["rendezvous"]  # rank 1 resolved what rank 0 registered
    assert all(p["job"] == job_id and p["world"] == "2" for p in probes.values())
    assert all(p["canary"] is None and p["cw"] is None for p in probes.values())  # allow-list only
    assert all(p["hf"] == "hf_allowlisted_value" for p in probes.values())  # forwarded through the job env
    assert "[rank 0] rank 0 received: hello from rank 1" in lines
    assert any("[rank 0] [rlaunch.iris] rank 0 registered rendezvous" in line for line in lines)
    assert any("[rank 1] [rlaunch.iris] rank 1 resolved rendezvous" in line for line in lines)
    rank1 = list(backend.logs(job_id, replica=1))
    assert rank1 and not any(line.startswith("[rank") for line in rank1)
    assert any("rank 1 resolved rendezvous" in line for line in rank1)

    # Iris's own view: one job of two tasks, each holding 8 H100 on a worker of the fake group.
    client = IrisClient.remote(iris_env.url, workspace=None)
    raw = client.job_status(JobName.from_wire(job_id))
    assert (raw.task_count, raw.resources.device.variant, raw.resources.device.count) == (2, "H100", 8)
    workers = {t.worker_id for t in client.list_tasks(JobName.from_wire(job_id))}
    assert len(workers) == 2 and all("h100x8" in w for w in workers)


# A coordinator that says where it runs, then submits a two-node child gang whose ranks say the same.
WHERE = "import json, os, sys; print(json.dumps({'python': sys.executable, 'cwd': os.getcwd()}), flush=True)"
COORDINATOR_WHERE = f"""
import os, sys
from rlaunch.cluster.protocol import JobSpec, JobState, Resources, backend_from_env
{WHERE}
backend = backend_from_env()
gang = Resources(cpu=2, accelerators=8, accelerator_type="H100")
child = backend.submit_child(JobSpec(name="child", argv=(sys.executable, "-c", {WHERE!r}), resources=gang, replicas=2,
                                     working_dir=os.getcwd()))
sys.exit(0 if backend.wait(child, timeout=180).state is JobState.SUCCEEDED else 1)
"""


def test_jobs_start_when_their_interpreter_and_paths_live_under_tmp(
    backend, iris_env: IrisCluster, home_under_tmp: Path
) -> None:
    """Iris's process runtime rewrites every argument under /tmp/ to a task-private directory: with
    HOME (and so every runtime environment) under /tmp, a coordinator and its child gang still start
    with their own interpreter and working directory."""
    from rlaunch.cluster.iris.backend import IrisBackend

    python, workdir = str(home_under_tmp / "venv" / "bin" / "python"), home_under_tmp / "work"
    workdir.mkdir()
    under_tmp = IrisBackend(cluster_config=str(iris_env.config), scheduling_timeout_seconds=120, python=python)
    spec = JobSpec(
        name="under-tmp", argv=py(COORDINATOR_WHERE), env=job_environment(), resources=Resources(cpu=0.5),
        working_dir=str(workdir),
    )  # fmt: skip
    job_id = under_tmp.submit(spec)
    status = backend.wait(job_id, timeout=300)
    assert status.state is JobState.SUCCEEDED, (status, list(backend.logs(job_id)))
    (child,) = status.children
    assert backend.status(child).state is JobState.SUCCEEDED, list(backend.logs(child))

    def places(job: str, count: int) -> list[dict] | None:
        found = [json.loads(line[line.index("{") :]) for line in backend.logs(job) if '{"python": ' in line]
        return found if len(found) == count else None

    here = {"python": python, "cwd": str(workdir)}
    assert python.startswith("/tmp/") and str(workdir).startswith("/tmp/")
    assert wait_for(lambda: places(job_id, 1), timeout=60, what="the coordinator's line") == [here]
    assert wait_for(lambda: places(child, 2), timeout=60, what="both ranks' lines") == [here, here]


# Coordinators import rlaunch: they get what every submitted job gets (`job_environment`: PYTHONPATH
# when rlaunch runs from a checkout, as in the tier).


def test_cancelling_the_coordinator_cancels_its_child(backend) -> None:
    coordinator = """
import sys
from rlaunch.cluster.protocol import JobSpec, backend_from_env
child = backend_from_env().submit_child(JobSpec(name="child", argv=(sys.executable, "-c", "import time; time.sleep(600)")))
print("child " + child, flush=True)
import time; time.sleep(600)
"""
    job_id = backend.submit(
        JobSpec(name="coordinator", argv=py(coordinator), env=job_environment(), resources=Resources(cpu=0.5))
    )
    child = wait_for(lambda: backend.status(job_id).children, timeout=120, what="the child job")[0]
    assert child.startswith(job_id + "/child-") and backend.status(child).parent == job_id
    wait_for(lambda: backend.status(child).state is JobState.RUNNING, timeout=120, what="the child running")
    ended = backend.cancel(job_id, reason="test")
    assert ended.state is JobState.CANCELLED
    assert backend.status(child).state is JobState.CANCELLED


def test_a_child_ends_when_its_parent_fails(backend) -> None:
    coordinator = """
import sys, time
from rlaunch.cluster.protocol import JobSpec, JobState, backend_from_env
backend = backend_from_env()
child = backend.submit_child(JobSpec(name="child", argv=(sys.executable, "-c", "import time; time.sleep(600)")))
while backend.status(child).state is not JobState.RUNNING:
    time.sleep(0.2)
print("child running; the coordinator fails now", flush=True)
sys.exit(5)
"""
    job_id = backend.submit(
        JobSpec(name="doomed", argv=py(coordinator), env=job_environment(), resources=Resources(cpu=0.5))
    )
    assert backend.wait(job_id, timeout=180).state is JobState.FAILED
    (child,) = backend.status(job_id).children
    ended = backend.wait(child, timeout=60)
    assert ended.state is JobState.CANCELLED, ended


def test_a_failing_replica_is_retried_once_then_fails_with_the_reason(backend) -> None:
    failing = "import sys; print('replica gives up: disk on fire', file=sys.stderr); sys.exit(3)"
    job_id = backend.submit(JobSpec(name="flaky", argv=py(failing), resources=Resources(cpu=0.5), max_retries=1))
    status = backend.wait(job_id, timeout=180)
    assert status.state is JobState.FAILED
    (replica,) = status.replicas
    assert (replica.attempts, replica.exit_code) == (2, 3)
    assert "Exit code: 3" in status.message and "disk on fire" in status.message
    wait_for(  # both attempts ran (Iris's log store may receive the last lines after the end)
        lambda: sum("replica gives up" in line for line in backend.logs(job_id)) == 2, timeout=60, what="two attempts"
    )


def test_an_unschedulable_gang_is_refused_before_anything_is_submitted(backend) -> None:
    before = [s.job_id for s in backend.list_jobs()]
    a100 = Resources(cpu=2, accelerators=8, accelerator_type="A100")
    with pytest.raises(
        CapacityError, match=r"no scaling group provides device gpu:a100 \(available: cpu, cpu-pair, h100x8, v100x4\)"
    ):
        backend.submit(JobSpec(name="wrong-device", argv=("true",), resources=a100))
    with pytest.raises(CapacityError, match=r"coschedule_mismatch: job needs 3 tasks coscheduled .*h100x8=2"):
        backend.submit(JobSpec(name="too-many-nodes", argv=("true",), resources=H100X8, replicas=3))
    sixteen = Resources(cpu=2, accelerators=16, accelerator_type="H100")
    with pytest.raises(CapacityError, match=r"gpu: need 16, available 8"):
        backend.check(JobSpec(name="too-many-gpus", argv=("true",), resources=sixteen))
    assert [s.job_id for s in backend.list_jobs()] == before


def test_with_only_a_controller_url_a_gang_no_slice_can_hold_is_refused(backend, iris_env: IrisCluster) -> None:
    """No cluster config: the controller's scale groups decide. A 4-node gang on the V100 group
    (slices of 2 VMs; no other test uses it) is refused: while the group has no live slice the
    controller shows no slice size, so the job is cancelled as soon as the autoscaler's first routing
    of it says no group can hold it; once a slice is live, it is refused before anything is submitted."""
    from rlaunch.cluster.iris.backend import IrisBackend

    url_only = IrisBackend(iris_env.url, scheduling_timeout_seconds=120)
    v100x4 = Resources(cpu=2, memory_bytes=10**9, disk_bytes=10**9, accelerators=4, accelerator_type="V100")
    four = JobSpec(name="four-nodes", argv=("true",), resources=v100x4, replicas=4)
    mismatch = r"coschedule_mismatch: job needs 4 tasks coscheduled but no matching group has num_vms=4 \(v100x4=2\)"
    started = time.monotonic()
    with pytest.raises(CapacityError, match=mismatch + r" \(the controller reports no slice size .* was cancelled\)"):
        url_only.submit(four)
    assert time.monotonic() - started < 30  # not the 120 s scheduling timeout
    (refused,) = [s for s in url_only.list_jobs() if s.name.startswith("four-nodes-")]
    assert refused.state is JobState.CANCELLED

    holder = url_only.submit(  # a gang the group can hold is submitted as before (its slice size unknown too)
        JobSpec(name="holder", argv=py("import time; time.sleep(600)"), resources=v100x4, replicas=2)
    )
    wait_for(lambda: url_only.status(holder).state is JobState.RUNNING, timeout=120, what="the 2-node gang running")
    before = [s.job_id for s in url_only.list_jobs()]
    with pytest.raises(CapacityError, match=mismatch + "$"):
        url_only.check(four)  # what `--run` asks before it submits the coordinator
    with pytest.raises(CapacityError, match=mismatch + "$"):
        url_only.submit(four)
    assert [s.job_id for s in url_only.list_jobs()] == before
    url_only.cancel(holder, reason="test")


def test_the_controller_itself_refuses_a_device_it_has_no_group_for(iris_env: IrisCluster) -> None:
    """Without the cluster config, the controller's own reason comes back; nothing is left behind."""
    from rlaunch.cluster.iris.backend import IrisBackend

    backend = IrisBackend(iris_env.url)
    before = len(backend.list_jobs())
    with pytest.raises(CapacityError, match=r"no scaling group provides device gpu:a100"):
        backend._launch(
            JobSpec(name="wrong", argv=("true",), resources=Resources(accelerators=8, accelerator_type="A100"))
        )
    assert len(backend.list_jobs()) == before


def test_rlaunch_jobs_and_the_iris_cli_see_the_same_job(backend, iris_env: IrisCluster) -> None:
    job_id = backend.submit(JobSpec(name="hello", argv=py("print('hello from iris')"), resources=Resources(cpu=0.5)))
    assert backend.wait(job_id, timeout=120).state is JobState.SUCCEEDED
    wait_for(lambda: any("hello from iris" in line for line in backend.logs(job_id)), timeout=60, what="the log line")
    rlaunch = [sys.executable, "-m", "rlaunch", "jobs", "--backend", "iris", "--controller-url", iris_env.url]
    shown = subprocess.run([*rlaunch, "status", job_id, "--json"], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["state"] == "succeeded"
    logs = subprocess.run([*rlaunch, "logs", job_id], capture_output=True, text=True, timeout=60)
    assert "hello from iris" in logs.stdout
    iris_logs = iris_env.cli("job", "logs", job_id)
    assert "hello from iris" in iris_logs.stdout + iris_logs.stderr


# Rank 0 publishes a Ray head record through the Iris endpoint registry (twice: a heartbeat), waits
# for rank 1's node record, then publishes the outcome; rank 1 waits for the head record with the
# protocol's rules, joins, and leaves with rank 0's outcome.
HEAD_RECORD_PROBE = """
import json, os, socket, sys, time, uuid
from rlaunch.storage import utc_now
from rlaunch.task.iris_rendezvous import IrisEndpointRendezvous
from rlaunch.task.rendezvous import GangOutcome, HeadRecord

directory, rank = sys.argv[1], int(os.environ["RLAUNCH_REPLICA_RANK"])
job = os.environ["RLAUNCH_JOB_ID"]
rendezvous = IrisEndpointRendezvous(directory, job)
if rank == 0:
    rendezvous.clear()
    epoch = uuid.uuid4().hex
    def record():
        return HeadRecord(gang_epoch=epoch, attempt_id="attempt-1", job_id=job, head_host=socket.gethostname(),
                          address=os.environ["RLAUNCH_NODE_IP"], port=int(os.environ["RLAUNCH_RAY_PORT"]),
                          num_nodes=2, python_version="3.12", ray_version="none", written_at=utc_now())
    rendezvous.publish_head(record())
    time.sleep(1)
    rendezvous.publish_head(record())  # heartbeat: registered again, the old registration dropped
    print("head published " + json.dumps({"address": os.environ["RLAUNCH_NODE_IP"], "port": os.environ["RLAUNCH_RAY_PORT"]}), flush=True)
    while not os.path.exists(os.path.join(directory, "nodes", "rank-1.json")):
        time.sleep(0.2)
    rendezvous.publish_outcome(GangOutcome(gang_epoch=epoch, exit_code=0, state="succeeded", reason=None, written_at=utc_now()))
else:
    head = rendezvous.wait_for_head(attempt_id="attempt-1", job_id=job, started_at=time.time(), timeout=120, rank=1)
    print("head resolved " + json.dumps({"address": head.address, "port": str(head.port), "node_ip": os.environ["RLAUNCH_NODE_IP"]}), flush=True)
    rendezvous.publish_node(1, {"state": "joined", "gang_epoch": head.gang_epoch})
    outcome = rendezvous.wait_for_outcome(head, rank=1, head_silence=120)
    print("outcome " + outcome.state, flush=True)
    sys.exit(outcome.exit_code)
"""


def test_the_ray_head_record_travels_through_iris_endpoints(backend, tmp_path: Path) -> None:
    directory = tmp_path / "rendezvous"
    argv = (*py(HEAD_RECORD_PROBE), str(directory))
    spec = JobSpec(name="head-record", argv=argv, env=job_environment(), resources=H100X8, replicas=2)
    job_id = backend.submit(spec)
    status = backend.wait(job_id, timeout=180)
    assert status.state is JobState.SUCCEEDED, (status, list(backend.logs(job_id)))

    def lines_with(marker: str) -> list[dict]:
        return [json.loads(line.split(marker, 1)[1]) for line in backend.logs(job_id) if marker in line]

    published = wait_for(lambda: lines_with("head published "), timeout=60, what="rank 0's line")[0]
    resolved = wait_for(lambda: lines_with("head resolved "), timeout=60, what="rank 1's line")[0]
    assert (resolved["address"], resolved["port"]) == (published["address"], published["port"])
    assert (published["address"], resolved["node_ip"]) == ("127.0.0.1", "127.0.0.2")  # a node identity per rank
    assert int(published["port"]) > 0  # the named port Iris reserved for rank 0's Ray head
    assert not (directory / "head.json").exists()  # the head record went through Iris, not the prefix
    assert json.loads((directory / "outcome.json").read_text())["state"] == "succeeded"
    assert json.loads((directory / "nodes" / "rank-1.json").read_text())["state"] == "joined"
