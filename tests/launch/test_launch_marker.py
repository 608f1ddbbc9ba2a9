"""`--run` for real: coordinator, launch host, child gang, task bootstrap, manifests, records.

The `test-marker` runtime follows the trainer's file contract in the host interpreter, so these
tests exercise every rlaunch component of a launch in seconds.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import pytest
import yaml

from tests.support.launchers import MULTINODE_SKIP, Launcher

pytestmark = pytest.mark.launch

VERSION = "2026.11.30"
MARKER = ("-m", "tests.experiments.marker", "--version", VERSION)


def rl_output(prefix: Path) -> Path:
    return prefix / "marker" / "rl" / VERSION


def only_attempt_dir(prefix: Path) -> Path:
    attempts = [p for p in (prefix / ".tmp").glob("ttl=*/marker/rl/*/attempts/*") if p.is_dir()]
    assert len(attempts) == 1, attempts
    return attempts[0]


def test_run_goes_through_coordinator_host_child_and_manifests(launcher: Launcher) -> None:
    done = launcher.run(*MARKER, "--run")
    assert done.returncode == 0, done.stdout + done.stderr
    submitted = re.search(r"submitted RL coordinator (\S+) \((\S+)\) via local", done.stdout)
    assert submitted, done.stdout
    coordinator_id = submitted.group(1)

    out = rl_output(launcher.prefix)
    record = json.loads((out / ".artifact.json").read_text())
    result = record["result"]
    assert result["coordinator_job_id"] == coordinator_id
    assert result["child_job_id"] and result["child_job_id"] != coordinator_id
    assert result["state"] == "succeeded" and result["global_step"] == 4
    assert result["runtime_profile"] == "test-marker" and len(result["runtime_digest"]) == 64
    assert result["topology"]["role_plan"]["train_batch_size"] == 2
    assert Path(result["hf_model_uri"], "model.safetensors").exists()

    terminal = json.loads((out / "terminal.json").read_text())
    assert terminal["result"]["state"] == "succeeded"
    assert terminal["result"]["child_job_id"] == result["child_job_id"]
    assert terminal["config"]["skyrl"]["trainer"]["ckpt_path"] == result["checkpoint_root"]

    attempt = only_attempt_dir(launcher.prefix)
    assert json.loads((attempt.parent / f"{attempt.name}.json").read_text())["result"]["state"] == "succeeded"
    assert json.loads((attempt / "joined" / "replica-0.json").read_text())["rank"] == 0
    marker = json.loads((attempt / "marker.json").read_text())
    skyrl = marker["skyrl"]
    assert Path(skyrl["trainer"]["policy"]["model"]["path"]).is_absolute()  # staged, task-local
    assert [f for f in marker["model_files"] if not f.startswith(".")] == ["config.json", "tokenizer.json"]
    assert skyrl["trainer"]["max_ckpts_to_keep"] == 2 and skyrl["trainer"]["seed"] == 7
    assert skyrl["generator"]["inference_engine"]["num_engines"] == 1  # rendered from the role plan
    resolved = yaml.safe_load((out / "resolved-launch.yaml").read_text())
    assert resolved["skyrl"]["trainer"]["train_batch_size"] == 2

    jobs = {j.job_id: j for j in launcher.backend().list_jobs()}
    assert jobs[result["child_job_id"]].parent == coordinator_id
    assert jobs[coordinator_id].state.value == "succeeded"

    attempts = json.loads((out / "run_record.json").read_text())["attempts"]
    assert [a["state"] for a in attempts] == ["succeeded"]
    assert attempts[0]["artifact"] == f"marker/rl@{VERSION}" and attempts[0]["fingerprint"] == record["fingerprint"]


def test_second_run_serves_from_storage_and_second_launch_is_refused(launcher: Launcher) -> None:
    assert launcher.run(*MARKER, "--run").returncode == 0
    again = launcher.run(*MARKER, "--run")
    assert again.returncode == 0, again.stderr
    assert "served from storage marker/rl@2026.11.30" in again.stdout
    assert "submitted RL coordinator" not in again.stdout

    out = rl_output(launcher.prefix)
    before = (out / "terminal.json").read_bytes()
    document = only_attempt_dir(launcher.prefix) / "launch.yaml"
    relaunch = launcher.run("-m", "rlaunch", "launch", "--config", str(document))
    assert relaunch.returncode == 1
    verdict = json.loads(relaunch.stdout.strip().splitlines()[-1])
    assert verdict["state"] == "failed" and "immutable" in verdict["failure"]
    assert (out / "terminal.json").read_bytes() == before


def test_only_allow_listed_credentials_are_forwarded_and_none_is_written(launcher: Launcher) -> None:
    secrets = {
        "HF_TOKEN": "hf_allowlisted_value_4711",
        "WANDB_API_KEY": "wandb_allowlisted_value_4712",
        "MY_SERVICE_TOKEN": "unrelated_secret_value_4713",
    }
    done = launcher.run(*MARKER, "--run", env=secrets)
    assert done.returncode == 0, done.stderr
    marker = json.loads((only_attempt_dir(launcher.prefix) / "marker.json").read_text())
    digests = marker["credential_sha256"]
    assert digests["HF_TOKEN"] == hashlib.sha256(secrets["HF_TOKEN"].encode()).hexdigest()
    assert digests["WANDB_API_KEY"] == hashlib.sha256(secrets["WANDB_API_KEY"].encode()).hexdigest()
    assert "MY_SERVICE_TOKEN" not in marker["env_names"]
    coordinator = next(j for j in launcher.backend().list_jobs() if j.parent is None)
    job_spec = json.loads((launcher.prefix / ".jobs" / coordinator.job_id / "job.json").read_text())
    assert "HF_TOKEN" in json.dumps(job_spec) and "MY_SERVICE_TOKEN" not in json.dumps(job_spec)

    written = [p for p in launcher.prefix.rglob("*") if p.is_file()]
    for path in written:
        data = path.read_bytes()
        for value in secrets.values():
            assert value.encode() not in data, f"{value} leaked into {path}"
    for value in secrets.values():
        assert value not in done.stdout and value not in done.stderr


def test_killing_the_coordinator_mid_run_leaves_no_half_written_record(launcher: Launcher) -> None:
    slow = (*MARKER, "--scenario", "slow", "--steps", "40")
    started = launcher.run(*slow, "--run", "--detach")
    assert started.returncode == 0, started.stderr
    coordinator_id = re.search(r"submitted RL coordinator (\S+)", started.stdout).group(1)
    deadline = time.monotonic() + 60
    metrics: list[Path] = []
    while time.monotonic() < deadline:
        metrics = list(launcher.prefix.glob(".tmp/*/marker/rl/*/attempts/*/metrics.jsonl"))
        if metrics and len(metrics[0].read_text().splitlines()) >= 5:
            break
        time.sleep(0.2)
    assert metrics, "the trainer never produced a metric"
    cancelled = launcher.run(
        "-m", "rlaunch", "jobs", "--root", str(launcher.prefix / ".jobs"), "cancel", coordinator_id, "--yes"
    )
    assert cancelled.returncode == 0, cancelled.stderr
    backend = launcher.backend()
    jobs = backend.list_jobs()
    assert all(j.state.terminal for j in jobs)
    out = rl_output(launcher.prefix)
    assert not (out / ".artifact.json").exists() and not (out / "terminal.json").exists()
    for path in launcher.prefix.rglob("*.json"):
        json.loads(path.read_text())  # every record on disk is whole
    first_steps = [json.loads(line)["step"] for line in metrics[0].read_text().splitlines()]

    rerun = launcher.run(*slow, "--run", "--retry", "relaunch after cancelling the coordinator")
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    record = json.loads((out / ".artifact.json").read_text())
    assert record["result"]["global_step"] == 40
    latest_attempt = record["result"]["attempt_id"]
    resumed = [
        json.loads(line)["step"]
        for line in next(launcher.prefix.glob(f".tmp/*/marker/rl/*/attempts/{latest_attempt}/metrics.jsonl"))
        .read_text()
        .splitlines()
    ]
    assert resumed[0] > 1 and resumed[0] <= max(first_steps) + 1 and resumed[-1] == 40
    states = [a["state"] for a in json.loads((out / "run_record.json").read_text())["attempts"]]
    assert states[-1] == "succeeded" and states[0] != "succeeded"


def test_a_gang_that_cannot_fit_is_refused_before_the_coordinator_is_submitted(launcher: Launcher) -> None:
    refused = launcher.run(*MARKER, "--replicas", "2", "--run", *MULTINODE_SKIP, env={"RLAUNCH_LOCAL_CPUS": "1"})
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "CPUs: needs 2" in refused.stderr and "Nothing was submitted." in refused.stderr
    assert "submitted RL coordinator" not in refused.stdout
    assert not (launcher.prefix / ".jobs").exists() or launcher.backend().list_jobs() == []
