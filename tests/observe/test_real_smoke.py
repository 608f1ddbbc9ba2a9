"""The real CPU smoke (TRL GRPO through the trl-cpu runtime) passes `verify-smoke`, and the tour's
commands (`status`, `verify-smoke`, `plot`; README, docs/getting-started.md) work on it. Part of the main suite (CI runs it):
the first run builds the trl-cpu environment (a few minutes), later runs reuse it from the
runtime cache ($RLAUNCH_RUNTIME_CACHE, else ~/.cache/rlaunch/runtimes).
"""

from __future__ import annotations

import json
import shutil

import pytest

from .lab import Lab

SMOKE = "experiments.smoke"
VERSION = "2026.11.30"
RUN = f"smoke/rl@{VERSION}"
SMOKE_TIMEOUT = 1800


@pytest.fixture(scope="module")
def smoke(lab: Lab) -> str:
    """The CPU smoke's RL stage, launched once for the tests of this module that read it."""
    launch = lab.start(SMOKE, VERSION, "--stage", "rl")
    assert launch.wait(SMOKE_TIMEOUT) == 0, lab.launch_log(SMOKE, VERSION)[-6000:]
    return RUN


@pytest.mark.e2e
def test_real_smoke_passes_verify_smoke_renders_fast_and_plots(lab: Lab, smoke: str, tmp_path) -> None:
    result = lab.rlaunch("verify-smoke", RUN)
    assert result.exit_code == 0, result.output
    assert result.output.count("[ok]") == 5

    s = lab.status(RUN)
    assert s["state"] == "succeeded" and s["runtime_profile"] == "trl-cpu"
    assert s["tasks"]["trainer_launcher"] == "torchrun" and s["tasks"]["expected_trainer_processes"] == 1
    model = s["model"]
    assert model["loaded_path"] == model["configured_path"] and model["weights_sha256"]
    assert model["expected_weight_files"] and model["weight_files"] == {
        name: sha for name, sha in model["expected_weight_files"].items() if name in model["weight_files"]
    }
    assert s["steps"]["latest_training_step"] == s["steps"]["final_step"] == 4
    assert s["steps"]["last"]["loss"] is not None and s["steps"]["last"]["reward_mean"] is not None
    assert s["checkpoints"]["latest_step"] == s["steps"]["latest_step"] and s["export"]["present"]
    evidence = {c["name"]: c["evidence"] for c in s["smoke"]["criteria"]}
    assert "match the model artifact record" in evidence["configured model-loading path active"]

    done = lab.rlaunch_process("status", RUN)
    assert done.returncode == 0 and "state        succeeded" in done.stdout, done.stderr

    out = tmp_path / "curves.png"
    plotted = lab.rlaunch("plot", RUN, "-o", str(out))
    assert plotted.exit_code == 0, plotted.output
    assert out.read_bytes()[:4] == b"\x89PNG"
    listed = json.loads(lab.rlaunch("runs", "--json", "--name", "smoke/").output)
    assert [r["artifact"] for r in listed] == [RUN] and listed[0]["state"] == "succeeded"


@pytest.mark.e2e
def test_a_real_run_record_with_the_sweep_field_is_grouped_and_compared(lab: Lab, smoke: str, tmp_path) -> None:
    """The smoke's own run record, given the field a sweep writes, in a prefix of its own (the lab's
    stays as launched): `runs` lists it under the sweep, `compare --sweep` reads its metrics."""
    prefix = tmp_path / "prefix"
    variant = prefix / "smoke" / "rl" / VERSION
    shutil.copytree(lab.output_path("smoke/rl", VERSION), variant)
    record = json.loads((variant / "run_record.json").read_text())
    settings = {"trainer.policy.optimizer_config.lr": 0.001}
    record["sweep"] = {"name": "smoke-lr", "variant": "lr-1e-3", "settings": settings}
    (variant / "run_record.json").write_text(json.dumps(record))

    listed = lab.rlaunch("runs", "--prefix", str(prefix))
    assert listed.exit_code == 0 and listed.stderr == "", listed.output
    assert listed.stdout.splitlines()[1:3] == [
        "sweep smoke-lr  1 variant: 1 succeeded",
        listed.stdout.splitlines()[2],
    ] and listed.stdout.splitlines()[2].startswith(f"  {RUN}  succeeded  ")
    assert listed.stdout.splitlines()[2].endswith("lr-1e-3  trainer.policy.optimizer_config.lr=0.001")

    plot = tmp_path / "rewards.png"
    done = lab.rlaunch("compare", "--sweep", "smoke-lr", "--prefix", str(prefix), "--json", "--plot", str(plot))
    assert done.exit_code == 0, done.output
    (shown,) = json.loads(done.stdout)["variants"]
    (attempt,) = record["attempts"]
    (logged,) = lab.prefix.glob(f".tmp/ttl=*/smoke/rl/{VERSION}/attempts/{attempt['attempt_id']}/metrics.jsonl")
    last = json.loads(logged.read_text().splitlines()[-1])
    assert (shown["variant"], shown["settings"], shown["state"]) == ("lr-1e-3", settings, "succeeded")
    assert shown["steps_done"] == shown["steps_planned"] == 4 and shown["final_reward"] == last["reward_mean"]
    assert shown["gpu_hours"] == 0.0  # a CPU gang holds no GPU
    assert plot.read_bytes()[:4] == b"\x89PNG"
