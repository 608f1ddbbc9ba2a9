"""`--sweep` for real: three learning rates of the CPU smoke as one submission on the local backend,
each variant its own artifact and run record, trained with its own rate, within the machine's
declared capacity (the variants' gangs queue, one at a time on two CPUs beside the coordinator)."""

from __future__ import annotations

import json
import os

import pytest

from tests.support.launchers import REPO, Launcher

pytestmark = pytest.mark.launch

VERSION = "2026.12.07"
LR = "trainer.policy.optimizer_config.lr"
RATES = {"lr-1e-3": 1e-3, "lr-2e-3": 2e-3, "lr-3e-3": 3e-3}
SWEEP = ("-m", "experiments.smoke", "--version", VERSION, "--stage", "rl", "--steps", "1")
GRID = ("--sweep", f"{LR}=1e-3,2e-3,3e-3")
# every process of the launch runs this checkout's rlaunch; the machine declares two CPUs
CHECKOUT = {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")]), "RLAUNCH_LOCAL_CPUS": "2"}


@pytest.mark.e2e
def test_a_three_value_sweep_of_the_smoke_runs_as_one_submission_within_capacity(launcher: Launcher) -> None:
    plan = json.loads(launcher.run(*SWEEP, *GRID, "--plan-format", "json", env=CHECKOUT).stdout)
    sweep = plan["sweep"]["name"]
    assert [v["variant"] for v in plan["sweep"]["variants"]] == list(RATES)

    done = launcher.run(*SWEEP, *GRID, "--run", timeout=3000, env=CHECKOUT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert done.stdout.count("submitted RL coordinator") == 1, done.stdout[-4000:]
    assert "1 variant gang(s) fit at once; the rest queue" in done.stdout, done.stdout[-4000:]

    fingerprints, spans = set(), []
    for label, rate in RATES.items():
        rl = launcher.prefix / "smoke" / f"rl.{label}" / VERSION
        fingerprints.add(json.loads((rl / ".artifact.json").read_text())["fingerprint"])
        record = json.loads((rl / "run_record.json").read_text())
        assert record["sweep"] == {"name": sweep, "variant": label, "settings": {LR: rate}}
        (attempt,) = record["attempts"]
        assert attempt["state"] == "succeeded" and attempt["recipe_overrides"] == {LR: rate}, attempt
        spans.append((attempt["phases"]["child_submitted"], attempt["phases"]["finished"]))
        logs = launcher.run("-m", "rlaunch", "logs", f"smoke/rl.{label}@{VERSION}", env=CHECKOUT)
        assert f"optimizer: learning_rate={rate!r} " in logs.stdout, logs.stdout[-3000:]
    assert len(fingerprints) == 3
    spans.sort()
    assert all(ended <= started for (_, ended), (started, _) in zip(spans, spans[1:], strict=False)), spans
    (model,) = [p for p in (launcher.prefix / "smoke").iterdir() if p.name == "model"]  # built once, shared
    assert (model / VERSION / ".artifact.json").exists()

    listed = launcher.run("-m", "rlaunch", "runs", "--sweep", sweep, env=CHECKOUT)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[1] == f"sweep {sweep}  3 variants: 3 succeeded", listed.stdout
    assert [line.split()[0] for line in lines[2:5]] == [f"smoke/rl.{label}@{VERSION}" for label in RATES]
    plot = launcher.prefix.parent / "rewards.png"
    compared = launcher.run("-m", "rlaunch", "compare", "--sweep", sweep, "--plot", str(plot), env=CHECKOUT)
    assert compared.returncode == 0, compared.stdout + compared.stderr
    assert compared.stdout.startswith(f"sweep {sweep}: 3 variant(s)\n"), compared.stdout
    for label in RATES:
        (row,) = [line for line in compared.stdout.splitlines() if line.startswith(label + " ") and " 1/1 " in line]
        assert " succeeded " in row, compared.stdout
    assert plot.stat().st_size > 0
