"""The CPU smoke for real: coordinator, host, child job and TRL GRPO through the trl-cpu runtime.

These launches train a tiny Qwen3 on this machine (seconds per step once the runtime environment
is cached; the first build of the environment takes a couple of minutes).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.launchers import Launcher

pytestmark = pytest.mark.launch

VERSION = "2026.11.30"
SMOKE = ("-m", "experiments.smoke", "--version", VERSION)
TIMEOUT = 1800


def attempts_of(prefix: Path, name: str) -> list[Path]:
    return sorted(p for p in prefix.glob(f".tmp/ttl=*/{name}/{VERSION}/attempts/*") if p.is_dir())


def metric_steps(attempt: Path) -> list[int]:
    path = attempt / "metrics.jsonl"
    return [json.loads(line)["step"] for line in path.read_text().splitlines()] if path.exists() else []


def runtime_python(prefix: Path) -> str:
    from rlaunch.runtimes.environment import ensure_environment
    from rlaunch.runtimes.registry import get_profile

    return ensure_environment(get_profile("trl-cpu"), progress=lambda _: None).python


@pytest.mark.e2e
def test_smoke_trains_exports_evaluates_and_reruns_from_storage(launcher: Launcher) -> None:
    done = launcher.run(*SMOKE, "--run", timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    prefix = launcher.prefix
    (attempt,) = attempts_of(prefix, "smoke/rl")
    assert json.loads((attempt / "joined" / "replica-0.json").read_text())["trainer_processes"] == 1
    assert json.loads((attempt / "joined" / "trainer-rank-0.json").read_text())["world_size"] == 1
    load = json.loads((attempt / "model_load.json").read_text())
    assert load["loaded_path"] == load["configured_path"] and load["identity"].startswith(f"smoke/model@{VERSION}:")
    steps = metric_steps(attempt)
    assert steps == [1, 2, 3, 4]
    lines = [json.loads(line) for line in (attempt / "metrics.jsonl").read_text().splitlines()]
    assert all(
        line["loss"] is not None and line["reward_mean"] is not None and line["kl"] is not None for line in lines
    )

    checkpoints = attempt.parents[1] / "checkpoints"
    assert (checkpoints / "latest").read_text().strip() == "4"
    assert sorted(p.name for p in checkpoints.glob("global_step_*")) == ["global_step_2", "global_step_4"]
    meta = json.loads((checkpoints / "global_step_4" / "rlaunch_checkpoint.json").read_text())
    rl = prefix / "smoke" / "rl" / VERSION
    record = json.loads((rl / ".artifact.json").read_text())["result"]
    assert meta["runtime_digest"] == record["runtime_digest"]
    assert json.loads((rl / "terminal.json").read_text())["result"]["state"] == "succeeded"
    # The model recorded its config.json: the run record sizes the smoke per CPU slot, and it fits.
    memory = json.loads((rl / "run_record.json").read_text())["attempts"][-1]["memory"]
    assert memory["device"]["name"] == "cpu slot" and memory["unsized"] == [], memory
    assert {r["status"] for r in memory["rows"]} == {"ok"}, memory

    export = Path(record["hf_model_uri"])
    assert export == rl / "exports" / "global_step_4" / "policy"
    report = json.loads((prefix / "smoke" / "eval" / VERSION / "report.json").read_text())
    assert report["n"] == 16 and 0.0 <= report["reward_mean"] <= 1.0  # the evaluation reloaded the export
    low, high = report["accuracy_interval"]
    assert 0.0 <= low <= report["accuracy"] <= high <= 1.0 and high > low
    assert report["model"] == f"smoke/rl@{VERSION}:{json.loads((rl / '.artifact.json').read_text())['fingerprint']}"
    assert report["data"].startswith(f"smoke/arithmetic@{VERSION}:")
    # the evaluation ran as a step job: a child of the coordinator, in the run record and in status
    (evaluation,) = json.loads((prefix / "smoke" / "eval" / VERSION / "run_record.json").read_text())["attempts"]
    jobs = {j.job_id: j for j in launcher.backend().list_jobs()}
    step_job = jobs[evaluation["child_job_id"]]
    assert evaluation["state"] == "succeeded" and evaluation["kind"] == "step"
    assert step_job.parent == evaluation["coordinator_job_id"] and step_job.labels["rlaunch.kind"] == "step"
    assert step_job.job_id in launcher.run("-m", "rlaunch", "jobs", "list").stdout
    status = launcher.run("-m", "rlaunch", "status", f"smoke/eval@{VERSION}").stdout
    assert "state        succeeded" in status and step_job.job_id in status and "step job     1 node(s)" in status
    logs = launcher.run("-m", "rlaunch", "logs", f"smoke/eval@{VERSION}")  # the step job's own output
    assert logs.returncode == 0, logs.stderr[-2000:]
    assert f"[rank 0] [rlaunch.step] staged smoke/rl@{VERSION} -> " in logs.stdout, logs.stdout[-2000:]
    assert f"running rlaunch.evaluation.eval_step:evaluate for smoke/eval@{VERSION}" in logs.stdout, logs.stdout[-2000:]
    assert f"smoke/eval@{VERSION}: result written to" in logs.stdout, logs.stdout[-2000:]
    generate = (
        "import sys, transformers;"
        "m=transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1]);t=transformers.AutoTokenizer.from_pretrained(sys.argv[1]);"
        "ids=t.apply_chat_template([{'role':'user','content':'What is 2 + 3?'}],add_generation_prompt=True,return_tensors='pt',return_dict=True)['input_ids'];"
        "out=m.generate(ids,max_new_tokens=6,do_sample=False);print(out.shape[1]-ids.shape[1])"
    )
    reloaded = subprocess.run(
        [runtime_python(prefix), "-c", generate, str(export)], capture_output=True, text=True, timeout=300
    )
    assert reloaded.returncode == 0, reloaded.stderr[-2000:]
    assert int(reloaded.stdout.strip().splitlines()[-1]) >= 1

    again = launcher.run(*SMOKE, "--run", timeout=TIMEOUT)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "Every step is served from storage; nothing to submit." in again.stdout
    assert len(attempts_of(prefix, "smoke/rl")) == 1


@pytest.mark.e2e
def test_smoke_resumes_after_its_child_job_is_killed(launcher: Launcher) -> None:
    # Past its first steps a CPU step takes well under a second: with 8 steps a stalled machine let the
    # first attempt finish between the checkpoint and the kill. 16 is all the smoke data holds (64 rows,
    # 4 prompts a step, one epoch), which leaves the kill about 8 s.
    steps = 16
    rl_only = (*SMOKE, "--stage", "rl", "--steps", str(steps))
    started = launcher.run(*rl_only, "--run", "--detach", timeout=TIMEOUT)
    assert started.returncode == 0, started.stderr[-3000:]
    coordinator = re.search(r"submitted RL coordinator (\S+)", started.stdout).group(1)
    backend = launcher.backend()
    deadline = time.monotonic() + TIMEOUT
    latest = None
    while time.monotonic() < deadline:
        marker = next(launcher.prefix.glob(f".tmp/ttl=*/smoke/rl/{VERSION}/checkpoints/latest"), None)
        if marker is not None and int(marker.read_text()) >= 2:
            latest = int(marker.read_text())
            break
        assert not backend.status(coordinator).state.terminal, backend.status(coordinator)
        time.sleep(0.5)
    assert latest is not None, "no checkpoint was committed"
    child = next(j for j in backend.list_jobs() if j.parent == coordinator)
    backend.cancel(child.job_id, reason="test kills the child mid-training")
    assert backend.wait(coordinator, timeout=300).state.value == "failed"
    (first,) = attempts_of(launcher.prefix, "smoke/rl")
    killed_at = max(metric_steps(first))
    assert killed_at < steps

    rerun = launcher.run(*rl_only, "--run", "--retry", "the child was cancelled mid-training", timeout=TIMEOUT)
    assert rerun.returncode == 0, rerun.stdout[-4000:] + rerun.stderr[-4000:]
    second = next(a for a in attempts_of(launcher.prefix, "smoke/rl") if a != first)
    resumed = metric_steps(second)
    checkpoint_step = json.loads((second / "model_load.json").read_text())["resumed_from_step"]
    assert checkpoint_step >= latest and resumed[0] == checkpoint_step + 1 and resumed[-1] == steps
    record = json.loads((launcher.prefix / "smoke" / "rl" / VERSION / ".artifact.json").read_text())
    assert record["result"]["global_step"] == steps


@pytest.mark.e2e
def test_two_device_slots_train_under_torchrun_and_both_ranks_join(launcher: Launcher) -> None:
    done = launcher.run(*SMOKE, "--stage", "rl", "--slots", "2", "--run", timeout=TIMEOUT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (attempt,) = attempts_of(launcher.prefix, "smoke/rl")
    ranks = sorted(json.loads(p.read_text())["rank"] for p in (attempt / "joined").glob("trainer-rank-*.json"))
    assert ranks == [0, 1]
    assert {json.loads(p.read_text())["world_size"] for p in (attempt / "joined").glob("trainer-rank-*.json")} == {2}
    assert metric_steps(attempt) == [1, 2, 3, 4]
