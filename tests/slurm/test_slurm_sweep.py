"""A sweep on Slurm is one submission: one coordinator job (labelled with the sweep) whose variants'
gangs are sbatch jobs of their own, queued by Slurm until they fit; each variant's record carries the sweep."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.slurm.slurm_cluster import SlurmCluster
from tests.support.launchers import checkout_launcher, marker_sweep_through

pytestmark = [pytest.mark.slurm, pytest.mark.e2e]


def test_a_sweep_on_slurm_is_one_submission_within_the_clusters_capacity(
    tmp_path: Path, slurm_env: SlurmCluster
) -> None:
    env = {
        "RLAUNCH_RUNTIME_PLUGINS": "tests.plugins.marker_runtime",
        "SLURM_CONF": str(slurm_env.conf),
        "RLAUNCH_SLURM_ROOT": os.environ["RLAUNCH_SLURM_ROOT"],
    }
    launcher = checkout_launcher(tmp_path / "prefix", env)
    sweep, attempts = marker_sweep_through(launcher, "slurm")
    from rlaunch.cluster.slurm.backend import SlurmBackend

    slurm = SlurmBackend()
    coordinator = slurm.status(attempts["lr-1e-3"]["coordinator_job_id"])
    assert coordinator.labels["rlaunch.sweep"] == sweep
    for attempt in attempts.values():
        shown = slurm_env.command("scontrol", "show", "job", attempt["child_job_id"], "-o")
        assert "JobState=COMPLETED" in shown, shown
