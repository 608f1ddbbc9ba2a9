"""`--set` for real: the CPU smoke trains with a learning rate set from the shell, and the run record,
the trainer's log and its metrics say so (the coordinator replays the argv, `--set` included)."""

from __future__ import annotations

import json
import os

import pytest

from tests.support.launchers import REPO, Launcher

pytestmark = pytest.mark.launch

VERSION = "2026.12.07"
LR = "trainer.policy.optimizer_config.lr"
SMOKE = ("-m", "experiments.smoke", "--version", VERSION, "--stage", "rl")
# every process of the launch (coordinator, host, trainer's launcher) runs this checkout's rlaunch
CHECKOUT = {"PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])}


@pytest.mark.e2e
def test_the_smoke_trains_with_a_learning_rate_set_from_the_shell(launcher: Launcher) -> None:
    plain = json.loads(launcher.run(*SMOKE, "--plan-format", "json", env=CHECKOUT).stdout)
    (unset,) = [s["fingerprint"] for s in plain["steps"] if s["identity"] == f"smoke/rl@{VERSION}"]

    done = launcher.run(*SMOKE, "--set", f"{LR}=2e-6", "--run", timeout=1800, env=CHECKOUT)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]

    rl = launcher.prefix / "smoke" / "rl" / VERSION
    assert json.loads((rl / ".artifact.json").read_text())["fingerprint"] != unset
    (attempt,) = json.loads((rl / "run_record.json").read_text())["attempts"]
    assert attempt["state"] == "succeeded" and attempt["recipe_overrides"] == {LR: 2e-6}, attempt
    logs = launcher.run("-m", "rlaunch", "logs", f"smoke/rl@{VERSION}", env=CHECKOUT)
    assert logs.returncode == 0, logs.stderr[-2000:]
    assert "optimizer: learning_rate=2e-06 " in logs.stdout, logs.stdout[-3000:]
    (metrics,) = launcher.prefix.glob(f".tmp/ttl=*/smoke/rl/{VERSION}/attempts/*/metrics.jsonl")
    rates = [json.loads(line)["learning_rate"] for line in metrics.read_text().splitlines()]
    assert rates and all(rate == pytest.approx(2e-6) for rate in rates), rates
