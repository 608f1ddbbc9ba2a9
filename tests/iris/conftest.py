"""The Iris tier: a real local Iris cluster per session (Python >= 3.12 with the iris extra).

Under an interpreter without Iris these modules are not collected at all: `tests/test_iris_tier.py`
runs them in a Python 3.12 environment it builds (or says in one line why it cannot).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.iris.iris_cluster import IrisCluster, iris_importable, start, stop
from tests.support.live_clusters import cluster_env, jobs_finished_by_the_test, stopped_at_the_end

if not iris_importable():
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def iris_cluster() -> Iterator[IrisCluster]:
    yield from stopped_at_the_end(start(), stop, "Iris cluster")


@pytest.fixture
def iris_env(iris_cluster: IrisCluster, monkeypatch: pytest.MonkeyPatch) -> IrisCluster:
    """IRIS_CONTROLLER_URL for this test; no developer rlaunch or Iris settings."""
    cluster_env(monkeypatch, ("RLAUNCH_", "IRIS_"), IRIS_CONTROLLER_URL=iris_cluster.url)
    return iris_cluster


@pytest.fixture
def backend(iris_env: IrisCluster) -> Iterator[object]:
    from rlaunch.cluster.iris.backend import IrisBackend

    yield from jobs_finished_by_the_test(
        IrisBackend(cluster_config=str(iris_env.config), scheduling_timeout_seconds=120)
    )


@pytest.fixture
def home_under_tmp() -> Iterator[Path]:
    """A fresh directory under /tmp/ holding `venv`: this tier's environment reached through a path
    there, as it is when HOME (and so the runtime cache) lives under /tmp. The venv is linked, and its
    pyvenv.cfg is found next to the link, so `venv/bin/python` is a complete environment whose
    `sys.executable` stays under /tmp."""
    assert sys.prefix != sys.base_prefix, "the Iris tier runs in a virtualenv (tests/support/py312_tier.py)"
    root = Path(tempfile.mkdtemp(prefix="rlaunch-iris-home-", dir="/tmp"))
    (root / "venv").symlink_to(sys.prefix, target_is_directory=True)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
