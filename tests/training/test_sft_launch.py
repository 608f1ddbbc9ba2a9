"""The SFT step end to end on the CPU twin (trl-cpu: the smoke's tiny Qwen3, two epochs of 24 rows),
and a model too big for its step's device refused by the dry run before anything is built."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from tests.support.launchers import REPO, Launcher

VERSION = "2026.12.07"
EXPERIMENT = ("-m", "tests.experiments.sft_warm", "--version", VERSION)
# this checkout's rlaunch, not the one the interpreter has installed
ENV = {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])}


def test_a_model_too_big_for_the_steps_device_is_refused_by_the_dry_run(launcher: Launcher) -> None:
    plan = launcher.run(*EXPERIMENT, "--placement", "l4", env=ENV)
    assert plan.returncode == 2, plan.stdout + plan.stderr
    assert f"sft/big@{VERSION}: memory.model_states: sft model states: the model states alone need" in plan.stderr
    assert "but one L4 has 22.49 GiB" in plan.stderr
    assert not (launcher.prefix / "sft").exists()  # nothing built, not even the data


@pytest.mark.e2e
def test_the_cpu_twin_trains_on_the_responses_and_records_the_exported_model(launcher: Launcher) -> None:
    done = launcher.run(*EXPERIMENT, "--placement", "cpu", "--run", env=ENV, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = launcher.prefix / "sft" / "warm" / VERSION
    record = json.loads((out / ".artifact.json").read_text())
    files = record["result"]["files"]
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(files)
    for name, digest in files.items():  # the manifest names every exported file by its sha256
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest, name
    base = json.loads((launcher.prefix / "smoke" / "model" / VERSION / ".artifact.json").read_text())
    assert files["model.safetensors"] != base["result"]["files"]["model.safetensors"]
    assert record["config"]["architecture_of"] == f"smoke/model@{VERSION}"  # FromBase: sized before it exists
    trained = json.loads((out / "sft.json").read_text())
    assert trained["steps"] == 6 == len(trained["losses"])  # 2 epochs x ceil(24 rows / 8)
    assert trained["last_loss"] < trained["first_loss"], trained
    plan = launcher.run(*EXPERIMENT, "--placement", "cpu", env=ENV)  # the base is recorded now: sized
    assert plan.returncode == 0 and "memory: sft training step ~" in plan.stdout, plan.stdout[-3000:]
