"""A sweep on Ray is one submission: one coordinator (labelled with the sweep) whose variants' gangs
are Ray jobs of their own, queued by Ray until they fit; each variant's record carries the sweep."""

from __future__ import annotations

from pathlib import Path

import pytest
from ray_clusters import RayCluster

from tests.support.launchers import checkout_launcher, marker_sweep_through

pytestmark = [pytest.mark.ray, pytest.mark.e2e]


def test_a_sweep_on_ray_is_one_submission_within_the_clusters_capacity(ray_env: RayCluster, tmp_path: Path) -> None:
    env = {"RLAUNCH_RUNTIME_PLUGINS": "tests.plugins.marker_runtime", "RAY_ADDRESS": ray_env.dashboard}
    launcher = checkout_launcher(tmp_path / "prefix", env)
    sweep, attempts = marker_sweep_through(launcher, "ray")
    from rlaunch.cluster.ray.backend import RayBackend

    ray = RayBackend()
    coordinator = ray.status(attempts["lr-1e-3"]["coordinator_job_id"])
    assert coordinator.labels["rlaunch.sweep"] == sweep
    for attempt in attempts.values():
        assert ray.status(attempt["child_job_id"]).parent == coordinator.job_id
