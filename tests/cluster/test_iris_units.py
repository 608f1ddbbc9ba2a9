"""The Iris backend's pieces that need no cluster (and no Iris): they run under Python 3.11 too.

The behaviour against a real Iris cluster is in tests/iris (the Python 3.12 tier).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlaunch.cluster.iris.backend import iris_job_name
from rlaunch.cluster.iris.connect import REQUIREMENTS, IrisUnavailableError, require_iris
from rlaunch.cluster.iris.task import BOOTSTRAP, JOB_ENV, MODULE, decode_job, encode_job, endpoint_name, replica_env
from rlaunch.cluster.protocol import get_backend
from rlaunch.errors import UserError
from rlaunch.names import MAX_JOB_NAME, name_refusal, sanitize_job_name
from rlaunch.skyrl import IrisSkyRLExecution
from tests.support.launchers import REPO


def test_choosing_iris_on_python_311_names_the_requirement(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "version_info", (3, 11, 9, "final", 0))
    with pytest.raises(IrisUnavailableError) as info:  # said by the dry run too (`protocol.dependency_problem`)
        get_backend("iris", controller_url="http://127.0.0.1:9")
    message = str(info.value)
    assert isinstance(info.value, UserError)
    assert "needs Python >= 3.12" in message and "pip install 'rlaunch[iris]'" in message
    assert all(requirement in message for requirement in REQUIREMENTS)


def test_without_iris_installed_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "version_info", (3, 12, 1, "final", 0))
    monkeypatch.setitem(sys.modules, "iris", None)  # import iris.client fails
    monkeypatch.setitem(sys.modules, "iris.client", None)
    with pytest.raises(IrisUnavailableError, match=r"which is not installed here: .*rlaunch\[iris\]"):
        require_iris()


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the refusal is what Python 3.11 users see")
def test_smoke_with_iris_on_python_311_submits_nothing_and_says_why(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("RLAUNCH_", "IRIS_"))},
        "RLAUNCH_PREFIX": str(tmp_path / "prefix"),
        "IRIS_CONTROLLER_URL": "http://127.0.0.1:9",
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run(
        [sys.executable, "-m", "experiments.smoke", "--version", "2026.11.30", "--backend", "iris", "--run"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the iris backend needs Python >= 3.12" in done.stderr and REQUIREMENTS[0] in done.stderr
    assert "Nothing was submitted." in done.stderr
    assert not (tmp_path / "prefix" / "smoke").exists()


@given(st.text(min_size=1, max_size=80))
def test_iris_job_names_satisfy_iris_rules(raw: str) -> None:
    try:
        name = sanitize_job_name(raw)
    except ValueError:
        return
    iris_name = iris_job_name(name)
    assert "/" not in iris_name and iris_name.strip() == iris_name and iris_name
    assert not iris_name.isdigit()  # a nested integer name would read as a task index
    assert iris_name == name or iris_name == f"job-{name}"


@pytest.mark.parametrize("name", ["a/b", "a b", "a\t", ""])
def test_iris_job_name_refuses_what_the_name_rule_refuses(name: str) -> None:
    with pytest.raises(ValueError) as err:
        iris_job_name(name)
    assert str(err.value) == name_refusal(name, field="Iris job name", max_length=MAX_JOB_NAME)


def test_the_job_travels_whole_and_replicas_get_only_the_allow_list(monkeypatch: pytest.MonkeyPatch) -> None:
    job = {
        "python": "/tmp/home/.cache/venv/bin/python",
        "argv": ["python", "-c", "pass"],
        "env": {"RLAUNCH_PREFIX": "/tmp/prefix", "HF_TOKEN": "hf_x"},
        "cwd": "/tmp/w",
    }
    assert decode_job(encode_job(job["python"], job["argv"], job["env"], job["cwd"])) == job
    with pytest.raises(SystemExit, match="RLAUNCH_IRIS_JOB"):
        decode_job(None)
    monkeypatch.setenv("WORKER_ONLY_TOKEN", "from-the-worker")
    monkeypatch.setenv("IRIS_TASK_ID", "/root/job/0:0")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    env = replica_env(job["env"], {"RLAUNCH_REPLICA_RANK": "0"})
    assert env["RLAUNCH_PREFIX"] == "/tmp/prefix"  # not rewritten to a task-private /tmp
    assert env["HF_TOKEN"] == "hf_x" and env["IRIS_TASK_ID"] == "/root/job/0:0" and env["PATH"] == "/usr/bin:/bin"
    assert env["RLAUNCH_REPLICA_RANK"] == "0"
    assert "WORKER_ONLY_TOKEN" not in env


def test_the_bootstrap_starts_the_submitters_interpreter_named_only_inside_the_job(tmp_path: Path) -> None:
    """Iris rewrites arguments under /tmp/, so the interpreter travels in the job's JSON, not in argv."""
    assert "/" not in BOOTSTRAP.split("json.loads", 1)[0]  # Iris's entrypoint names no path
    interpreter = tmp_path / "venv" / "bin" / "python"  # under /tmp, as with a HOME there
    interpreter.parent.mkdir(parents=True)
    interpreter.write_text('#!/bin/sh\necho "started $0 $*"\n')
    interpreter.chmod(0o755)

    def bootstrap(python: Path) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ["PATH"], JOB_ENV: encode_job(str(python), ["true"], {}, None)}
        return subprocess.run([sys.executable, "-c", BOOTSTRAP], env=env, capture_output=True, text=True, timeout=60)

    started = bootstrap(interpreter)
    assert started.returncode == 0 and started.stdout.strip() == f"started {interpreter} -m {MODULE}"
    missing = bootstrap(tmp_path / "gone" / "python")
    assert missing.returncode == 1
    assert f"cannot start the submitter's interpreter '{tmp_path}/gone/python' on this worker" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_rendezvous_endpoint_names_are_per_job() -> None:
    assert endpoint_name("/root/coord/child") == "rlaunch-rendezvous.root.coord.child"
    assert endpoint_name("/root/a") != endpoint_name("/root/b")


def test_iris_execution_needs_a_cluster_config_or_a_controller() -> None:
    with pytest.raises(TypeError, match=r"needs cluster_config=.* or controller_url="):
        IrisSkyRLExecution(cpu=1, memory="1GB", disk="1GB")
    with pytest.raises(ValueError, match=r"controller_url='127.0.0.1:80' must be an http\(s\):// URL"):
        IrisSkyRLExecution(cpu=1, memory="1GB", disk="1GB", controller_url="127.0.0.1:80")
    with pytest.raises(ValueError, match=r"priority='urgent': choose one of \['production', 'interactive'"):
        IrisSkyRLExecution(cpu=1, memory="1GB", disk="1GB", controller_url="http://c:1", priority="urgent")
    execution = IrisSkyRLExecution(
        cpu=1, memory="1GB", disk="1GB", controller_url="http://c:1", priority="batch", scheduling_timeout_seconds=60
    )
    placement = execution.placement()
    assert (placement["controller_url"], placement["priority"], placement["scheduling_timeout_seconds"]) == (
        "http://c:1",
        "batch",
        60,
    )


def test_an_iris_gang_meets_through_endpoints_and_others_through_the_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    from rlaunch.task.iris_rendezvous import IrisEndpointRendezvous
    from rlaunch.task.rendezvous import StorageRendezvous, rendezvous_for

    doc = SimpleNamespace(
        artifacts=SimpleNamespace(attempts_root="/shared/attempts"), run=SimpleNamespace(attempt_id="a1")
    )
    monkeypatch.setenv("RLAUNCH_BACKEND", "iris")
    monkeypatch.setenv("RLAUNCH_JOB_ID", "/root/coordinator/gang")
    chosen = rendezvous_for(doc)  # type: ignore[arg-type]
    assert isinstance(chosen, IrisEndpointRendezvous) and chosen.name == "rlaunch-ray-head.root.coordinator.gang"
    assert chosen.directory == "/shared/attempts/a1/rendezvous"  # outcome and node records stay on the prefix
    monkeypatch.setenv("RLAUNCH_BACKEND", "local")
    assert type(rendezvous_for(doc)) is StorageRendezvous  # type: ignore[arg-type]


def test_a_ray_head_on_a_port_inside_rays_worker_range_moves_the_worker_ports() -> None:
    from rlaunch.task.ray_node import NodeSpec

    def head(port: int) -> list[str]:
        spec = NodeSpec(rank=0, node_ip="127.0.0.1", cpus=1, gpus=0, memory_bytes=2**30, port=port, head_address=None)
        return spec.argv("python", "/tmp/ray")

    iris_port = head(12005)  # Iris reserves ports from 12000 up, inside Ray's default 10002-19999
    assert (
        "--port=12005" in iris_port
        and "--min-worker-port=20000" in iris_port
        and "--max-worker-port=29997" in iris_port
    )
    assert not any(arg.startswith("--min-worker-port") for arg in head(6379))
