"""RL experiments launched on Ray (`--backend ray`, i.e. `RaySkyRLExecution`) against the same
experiments on the local backend: the same plan (fingerprints), and the same manifests, join
markers, metrics and export; the coordinator and child job ids recorded are Ray submission ids."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ray_clusters import RayCluster

from tests.support.launchers import MULTINODE_SKIP, checkout_launcher, replay_refused_through
from tests.support.polling import run_python

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
VERSION = "2026.11.30"
HEAVY = ("torch", "ray", "transformers", "trl", "vllm", "skyrl")
ATTEMPT_ID = re.compile(r"\b[0-9a-f]{12}\b")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLAUNCH_", "RAY_"))}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def run_experiment(
    module: str, args: list[str], cwd: Path, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    done = run_python(["-m", module, *args], cwd, env, timeout=timeout)
    assert done.returncode == 0, (
        f"{module} {args} failed ({done.returncode}):\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    )
    return done


# -- the plan does not depend on where it runs -------------------------------------------------


def plan(module: str, backend: str, tmp_path: Path, stubs: Path) -> dict[str, Any]:
    """`--plan-format json` with stand-ins for heavy packages first on the path (an import is caught)."""
    code = (
        "import json, runpy, sys\n"
        f"sys.argv = [{module!r}, '--version', {VERSION!r}, '--plan-format', 'json', '--backend', {backend!r}]\n"
        "try:\n"
        f"    runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))\n"
    )
    env = clean_env(
        PYTHONPATH=os.pathsep.join([str(stubs), str(REPO)]),
        RLAUNCH_PREFIX=str(tmp_path / "prefix"),
        RLAUNCH_RUNTIME_PLUGINS="tests.plugins.marker_runtime",
        RAY_ADDRESS="http://127.0.0.1:9",  # a dry run must never contact the cluster
    )
    done = run_python(["-c", code], tmp_path, env)
    assert done.returncode == 0, done.stderr
    *printed, heavy = done.stdout.strip().splitlines()
    assert json.loads(heavy) == [], f"a {backend} dry run of {module} imported {heavy}"
    steps = json.loads("\n".join(printed))["steps"]
    return {s["identity"]: (s["fingerprint"], s["action"], s["path"], s["deps"]) for s in steps}


@pytest.mark.parametrize("module", ["experiments.smoke", "tests.experiments.marker"])
def test_choosing_ray_changes_no_fingerprint_and_a_dry_run_imports_no_ray(module: str, tmp_path: Path) -> None:
    stubs = tmp_path / "stubs"
    for name in HEAVY:
        (stubs / name).mkdir(parents=True)
        (stubs / name / "__init__.py").write_text("# stand-in: importing it is what the test catches\n")
    local, ray = plan(module, "local", tmp_path, stubs), plan(module, "ray", tmp_path, stubs)
    assert local == ray
    assert any(identity.endswith("/rl@" + VERSION) for identity in local)


# -- the same launch on both backends -----------------------------------------------------------


def relative_files(root: Path) -> list[str]:
    return sorted(ATTEMPT_ID.sub("<attempt>", str(p.relative_to(root))) for p in root.rglob("*") if p.is_file())


def attempt_dir(output: Path) -> Path:
    (manifest,) = sorted(
        (output.parents[2] / ".tmp").glob(f"ttl=*/{output.relative_to(output.parents[2])}/attempts/*.json")
    )
    return manifest.with_suffix("")


def launch_outputs(output: Path) -> dict[str, Any]:
    """What a launch leaves behind, with the ids and times that differ between runs taken out."""
    attempt = attempt_dir(output)
    temp_root = attempt.parents[1]
    terminal = json.loads((output / "terminal.json").read_text())
    attempt_manifest = json.loads(attempt.with_suffix(".json").read_text())
    joined = {p.name: json.loads(p.read_text()) for p in sorted((attempt / "joined").glob("*.json"))}
    metrics = [json.loads(line) for line in (attempt / "metrics.jsonl").read_text().splitlines()]
    export = {
        p.relative_to(output).as_posix(): p.read_bytes() for p in sorted((output / "exports").rglob("*")) if p.is_file()
    }
    return {
        "output files": relative_files(output),
        "temporary files": relative_files(temp_root),
        "terminal state": terminal["result"]["state"],
        "terminal keys": sorted(terminal),
        "attempt state": attempt_manifest["result"]["state"],
        "joined": {name: (m["rank"], m["world_size"]) for name, m in joined.items()},
        "metric steps": [m["step"] for m in metrics],
        "metric keys": sorted({k for m in metrics for k in m if k not in ("time", "step_time")}),
        "export": export,
    }


def run_record(output: Path) -> dict[str, Any]:
    (attempt,) = json.loads((output / "run_record.json").read_text())["attempts"]
    record: dict[str, Any] = attempt
    return record


def test_the_marker_experiment_on_ray_leaves_what_it_leaves_on_the_local_backend(
    ray_env: RayCluster, tmp_path: Path
) -> None:
    args = ["--version", VERSION, "--run", "--replicas", "2", *MULTINODE_SKIP]
    common = {"RLAUNCH_RUNTIME_PLUGINS": "tests.plugins.marker_runtime"}
    local_env = clean_env(
        **common,
        RLAUNCH_PREFIX=str(tmp_path / "local"),
        RLAUNCH_LOCAL_ROOT=str(tmp_path / "jobs"),
        RLAUNCH_STAGING_ROOT=str(tmp_path / "stage-local"),
    )
    ray_env_vars = clean_env(
        **common,
        RLAUNCH_PREFIX=str(tmp_path / "ray"),
        RLAUNCH_STAGING_ROOT=str(tmp_path / "stage-ray"),
        RAY_ADDRESS=ray_env.dashboard,
    )
    run_experiment("tests.experiments.marker", [*args, "--backend", "local"], tmp_path / "cwd-local", local_env)
    done = run_experiment("tests.experiments.marker", [*args, "--backend", "ray"], tmp_path / "cwd-ray", ray_env_vars)
    local_out, ray_out = tmp_path / "local" / "marker/rl" / VERSION, tmp_path / "ray" / "marker/rl" / VERSION
    local, ray = launch_outputs(local_out), launch_outputs(ray_out)
    assert ray == local
    assert local["joined"] == {"replica-0.json": (0, 2), "replica-1.json": (1, 2), "trainer-rank-0.json": (0, 1)}

    # The run record names Ray's submission ids: the coordinator, and the child it submitted.
    record = run_record(ray_out)
    assert record["backend"] == "ray" and record["placement"]["address"] == ray_env.dashboard
    from rlaunch.cluster.ray.backend import RayBackend

    backend = RayBackend()
    submission_ids = {job.submission_id for job in backend.client.list_jobs()}
    assert {record["coordinator_job_id"], record["child_job_id"]} <= submission_ids
    child = backend.status(record["child_job_id"])
    assert child.parent == record["coordinator_job_id"] and child.state.value == "succeeded"
    assert [(r.state.value, r.attempts, r.exit_code) for r in child.replicas] == [("succeeded", 1, 0)] * 2
    assert backend.status(record["coordinator_job_id"]).children == (record["child_job_id"],)
    joined = json.loads((attempt_dir(ray_out) / "joined" / "replica-1.json").read_text())
    assert joined["job_id"] == record["child_job_id"]
    assert f"submitted RL coordinator {record['coordinator_job_id']}" in done.stdout


def test_a_graph_built_from_an_unforwarded_variable_is_refused_by_its_coordinator_on_ray(
    ray_env: RayCluster, tmp_path: Path
) -> None:
    """The Ray job of the coordinator starts from an allow-list, so the variable the graph read stays
    behind; the refusal names the Ray submission id of the coordinator that refused."""
    launcher = checkout_launcher(tmp_path / "prefix", {"RAY_ADDRESS": ray_env.dashboard})
    refusal = replay_refused_through(launcher, "ray")
    from rlaunch.cluster.ray.backend import RayBackend

    coordinator = RayBackend().status(str(refusal["coordinator_job_id"]))
    assert coordinator.state.value == "failed" and coordinator.children == ()


def test_a_step_job_on_ray_joins_like_a_gang_of_one_as_the_coordinators_child(
    ray_env: RayCluster, tmp_path: Path
) -> None:
    env = clean_env(
        RLAUNCH_RUNTIME_PLUGINS="tests.plugins.marker_runtime",
        RLAUNCH_PREFIX=str(tmp_path / "ray"),
        RLAUNCH_STAGING_ROOT=str(tmp_path / "stage-ray"),
        RAY_ADDRESS=ray_env.dashboard,
    )
    args = ["--version", VERSION, "--step-job", "--backend", "ray", "--run"]
    run_experiment("tests.experiments.marker", args, tmp_path / "cwd", env)
    rl = run_record(tmp_path / "ray" / "marker/rl" / VERSION)
    count = run_record(tmp_path / "ray" / "marker/count" / VERSION)
    assert count["backend"] == "ray" and count["state"] == "succeeded" and count["kind"] == "step"
    assert count["coordinator_job_id"] == rl["coordinator_job_id"]
    assert count["placement"]["address"] == ray_env.dashboard  # how `rlaunch status` reaches its jobs
    from rlaunch.cluster.ray.backend import RayBackend

    step_job = RayBackend().status(count["child_job_id"])
    assert step_job.parent == rl["coordinator_job_id"] and step_job.labels["rlaunch.kind"] == "step"
    assert [(r.state.value, r.attempts, r.exit_code) for r in step_job.replicas] == [("succeeded", 1, 0)]
    result = json.loads((tmp_path / "ray" / "marker/count" / VERSION / ".artifact.json").read_text())["result"]
    assert result["rows"] == 8 and str(tmp_path / "stage-ray") in result["data"]  # read from the staged copy


@pytest.mark.e2e
def test_the_cpu_smoke_on_ray_leaves_what_it_leaves_on_the_local_backend(ray_env: RayCluster, tmp_path: Path) -> None:
    """The real trl-cpu smoke (2 optimizer steps), once per backend in one prefix: the local run
    builds tokenizer, model and data; the Ray run reuses them and trains a second RL version."""
    prefix = tmp_path / "prefix"
    base = ["--version", VERSION, "--stage", "rl", "--steps", "2", "--run"]
    env = clean_env(RLAUNCH_PREFIX=str(prefix), RLAUNCH_LOCAL_ROOT=str(tmp_path / "jobs"))
    for name in ("RLAUNCH_RUNTIME_CACHE",):
        if os.environ.get(name):
            env[name] = os.environ[name]
    run_experiment("experiments.smoke", [*base, "--backend", "local"], tmp_path / "cwd", env)
    other = f"{VERSION}.1"
    run_experiment(
        "experiments.smoke",
        [*base, "--override", f"smoke/rl={other}", "--backend", "ray"],
        tmp_path / "cwd",
        {**env, "RAY_ADDRESS": ray_env.dashboard},
    )
    local_out, ray_out = prefix / "smoke/rl" / VERSION, prefix / "smoke/rl" / other
    local, ray = launch_outputs(local_out), launch_outputs(ray_out)
    assert ray == local  # down to the exported weights: same seed, same machine
    assert local["metric steps"] == [1, 2] and "model.safetensors" in "".join(local["export"])
    record = run_record(ray_out)
    assert record["backend"] == "ray" and record["coordinator_job_id"] and record["child_job_id"]


def test_a_ray_driver_runtime_on_ray_runs_only_its_driver_attached_to_the_cluster(
    ray_env: RayCluster, tmp_path: Path
) -> None:
    """No nested Ray cluster and no gang placement group: the child job is the driver alone, and
    the driver's RAY_ADDRESS is the cluster the job runs in (`rlaunch.task.ray_cluster.run_attached`)."""
    env = clean_env(
        RLAUNCH_RUNTIME_PLUGINS="tests.plugins.marker_runtime,tests.plugins.ray_driver_runtime",
        RLAUNCH_PREFIX=str(tmp_path / "prefix"),
        RLAUNCH_STAGING_ROOT=str(tmp_path / "stage"),
        RAY_ADDRESS=ray_env.dashboard,
    )
    args = ["--version", VERSION, "--run", "--backend", "ray", "--replicas", "2", *MULTINODE_SKIP]
    args += ["--runtime", "test-ray-driver", "--scenario", "attach_only"]
    done = run_experiment("tests.experiments.marker", args, tmp_path / "cwd", env)
    output = tmp_path / "prefix" / "marker/rl" / VERSION
    attached = json.loads((attempt_dir(output) / "ray_attach.json").read_text())
    gcs_port = ray_env.gcs.rpartition(":")[2]
    assert attached["address"].rpartition(":")[2] == gcs_port and len(attached["nodes"]) == 1  # (as Ray names it)
    assert "starting Ray head" not in done.stdout + done.stderr
    record = run_record(output)
    from rlaunch.cluster.ray.backend import RayBackend

    child = RayBackend().status(record["child_job_id"])
    assert child.state.value == "succeeded" and len(child.replicas) == 1  # the driver, not a 2-node gang
    assert child.labels["rlaunch.gang"] == "ray-driver-in-cluster"
