"""The slurm tier: a real Slurm (two nodes on this machine) per session; see `slurm_cluster`.

Where Slurm cannot be started (not Linux, not root and not installed, apt-get failing, daemons
not coming up), every test of the tier is skipped with the one line saying why.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slurm.slurm_cluster import SlurmCluster, SlurmUnavailable, start, stop
from tests.support.live_clusters import cluster_env, jobs_finished_by_the_test, stopped_at_the_end


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    root = Path(tempfile.mkdtemp(prefix="rlaunch-slurm-"))
    try:
        cluster = start(root)
    except SlurmUnavailable as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"slurm tier skipped: {exc}")
    try:
        yield from stopped_at_the_end(cluster, stop, "Slurm cluster")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def slurm_env(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> SlurmCluster:
    """SLURM_CONF for this test, the jobs' root under its tmp_path; no developer settings."""
    cluster_env(
        monkeypatch,
        ("RLAUNCH_", "SLURM_"),
        SLURM_CONF=str(slurm_cluster.conf),
        RLAUNCH_SLURM_ROOT=str(tmp_path / "slurm-jobs"),
    )
    return slurm_cluster


@pytest.fixture
def backend(slurm_env: SlurmCluster) -> Iterator[object]:
    from rlaunch.cluster.slurm.backend import SlurmBackend

    yield from jobs_finished_by_the_test(SlurmBackend(kill_grace=2.0))
