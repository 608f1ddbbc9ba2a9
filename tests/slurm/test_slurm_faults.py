"""What Slurm does to a running RL run, told truthfully (issue 33's Slurm faults).

A slow marker run is launched through the Slurm backend (its coordinator a Slurm job, its training
gang a two-node Slurm job, one replica on each node) and, once it trains:

  node down          `scontrol update state=down` of the gang's node the coordinator is not on.
                     What Slurm does: the job becomes NODE_FAIL (reason NodeDown); srun returns
                     (with 0) for the step on that node and the driver gets SIGTERM. The attempt
                     must end failed, classed `operational: node failure` at that node with the
                     next step, in the record and in `rlaunch status`; nothing half-written.
  slurmctld restart  slurmctld stopped by its PID and started again a few seconds later. What Slurm
                     does: it recovers its jobs from StateSaveLocation and the steps never stop, so
                     the run goes on and succeeds, one attempt, every step.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from rlaunch.launch_config.failures import NEXT_STEPS
from tests.slurm.slurm_cluster import (
    SlurmCluster,
    restart_slurmctld,
    restore_node,
    slurmctld_pid,
    start_slurmctld,
    steps_left,
)
from tests.support.launchers import MULTINODE_SKIP, Launcher, checkout_launcher
from tests.support.polling import wait_for

pytestmark = pytest.mark.slurm
VERSION = "2026.12.07"
RUN = f"marker/rl@{VERSION}"


def _marker(steps: int) -> tuple[str, ...]:
    return (
        "-m", "tests.experiments.marker", "--version", VERSION, "--backend", "slurm", "--replicas", "2",
        "--scenario", "slow", "--steps", str(steps), "--run", "--detach", *MULTINODE_SKIP,
    )  # fmt: skip


def _launch(tmp_path: Path, slurm_env: SlurmCluster, steps: int) -> Launcher:
    env = {"SLURM_CONF": str(slurm_env.conf), "RLAUNCH_SLURM_ROOT": os.environ["RLAUNCH_SLURM_ROOT"]}
    launcher = checkout_launcher(tmp_path / "prefix", env)
    done = launcher.run(*_marker(steps), timeout=120)
    assert done.returncode == 0 and "via slurm" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    return launcher


def _record(launcher: Launcher) -> dict:
    path = launcher.prefix / "marker" / "rl" / VERSION / "run_record.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _training(launcher: Launcher, steps: int) -> dict | None:
    """The attempt once its trainer has logged `steps` steps."""
    attempts = _record(launcher).get("attempts") or [{}]
    attempt_id = attempts[-1].get("attempt_id")
    metrics = list(launcher.prefix.glob(f".tmp/*/marker/rl/{VERSION}/attempts/{attempt_id}/metrics.jsonl"))
    trained = attempt_id and attempts[-1].get("child_job_id") and metrics
    return attempts[-1] if trained and len(metrics[0].read_text().splitlines()) >= steps else None


def _status(launcher: Launcher, *flags: str) -> str:
    done = launcher.run("-m", "rlaunch", "status", RUN, *flags, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _final(launcher: Launcher) -> dict:
    return wait_for(
        lambda: (s := json.loads(_status(launcher, "--json"))) and s["is_terminal"] and s, 180, "a final state"
    )


def _nothing_half_written(root: Path) -> None:
    """No temporary file of an atomic write is left, and every JSON record parses."""
    temporaries = [p for p in root.rglob(".*.tmp-*")]
    assert not temporaries, temporaries
    for path in root.rglob("*.json"):
        json.loads(path.read_text())


def _slurm_state(slurm: SlurmCluster, job_id: str) -> str:
    return slurm.command("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T").strip()


def _queued(slurm: SlurmCluster, *job_ids: str) -> set[str]:
    return set(job_ids) & set(slurm.command("squeue", "-h", "-o", "%i").split())


def test_a_node_set_down_under_the_gang_fails_the_attempt_as_a_node_failure_at_that_node(
    tmp_path: Path, slurm_env: SlurmCluster
) -> None:
    launcher = _launch(tmp_path, slurm_env, steps=400)
    victim = None
    try:
        attempt = wait_for(lambda: _training(launcher, 1), 180, "the gang to train")
        coordinator, child = attempt["coordinator_job_id"], attempt["child_job_id"]
        (coordinator_node,) = slurm_env.command("squeue", "-h", "-j", coordinator, "-o", "%N").split()
        (victim,) = {"n1", "n2"} - {coordinator_node}  # the gang spans both; the coordinator lives on
        slurm_env.command("scontrol", "update", f"nodename={victim}", "state=down", "reason=rlaunch fault test")

        shown = _final(launcher)
        entry = _record(launcher)["attempts"][-1]
        assert entry["attempt_id"] == attempt["attempt_id"] and entry["state"] == "failed", entry
        assert shown["state"] == "failed", shown
        found = shown["failure_class"]
        assert (found["kind"], found["cause"], found["where"]) == ("operational", "node failure", victim), found
        assert found["advice"] == NEXT_STEPS["node failure"] and entry["failure_class"] == found
        assert "NODE_FAIL" in found["evidence"] or "NodeDown" in found["evidence"], found
        text = _status(launcher)
        assert "operational: node failure" in text and f"on node(s) {victim}" in text, text
        assert '--retry "node failure"' in text, text
        assert _slurm_state(slurm_env, child) == "NODE_FAIL"  # what Slurm itself says of the gang
        wait_for(lambda: not _queued(slurm_env, coordinator, child), 60, "both jobs to leave squeue")
        wait_for(lambda: not steps_left(slurm_env, child), 60, "the gang's steps to end, on the down node too")
        _nothing_half_written(launcher.prefix)
        _nothing_half_written(Path(os.environ["RLAUNCH_SLURM_ROOT"]))
    finally:
        if victim:
            restore_node(slurm_env, victim)  # later tests get both nodes back
        launcher.run("-m", "rlaunch", "cancel", RUN, "--yes", timeout=120)


def test_a_slurmctld_restart_under_a_training_run_loses_nothing(tmp_path: Path, slurm_env: SlurmCluster) -> None:
    steps = 24
    launcher = _launch(tmp_path, slurm_env, steps=steps)
    try:
        attempt = wait_for(lambda: _training(launcher, 2), 180, "the gang to train")
        restart_slurmctld(slurm_env, down_for=3.0)
        assert _training(launcher, 2) is not None and not _final_yet(launcher), "the run ended with slurmctld"

        shown = _final(launcher)
        record = _record(launcher)
        assert shown["state"] == "succeeded", shown
        assert [a["attempt_id"] for a in record["attempts"]] == [attempt["attempt_id"]]  # the same attempt
        assert record["attempts"][-1]["state"] == "succeeded" and shown["steps"]["latest_step"] == steps, shown
        jobs = (attempt["coordinator_job_id"], attempt["child_job_id"])  # Slurm kept both through its restart
        wait_for(lambda: all(_slurm_state(slurm_env, j) == "COMPLETED" for j in jobs), 60, "Slurm to complete both")
        _nothing_half_written(launcher.prefix)
    finally:
        if slurmctld_pid(slurm_env) is None:
            start_slurmctld(slurm_env)  # never leave the tier without its scheduler
        launcher.run("-m", "rlaunch", "cancel", RUN, "--yes", timeout=120)


def _final_yet(launcher: Launcher) -> bool:
    return bool(json.loads(_status(launcher, "--json"))["is_terminal"])
