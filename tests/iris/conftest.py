"""The Iris tier: a real local Iris cluster per session (Python >= 3.12 with the iris extra).

Under an interpreter without Iris these modules are not collected at all: `tests/test_iris_tier.py`
runs them in a Python 3.12 environment it builds (or says in one line why it cannot).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.iris.iris_cluster import IrisCluster, iris_importable, start, stop

if not iris_importable():
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def iris_cluster() -> Iterator[IrisCluster]:
    cluster = start()
    try:
        yield cluster
    finally:
        left = stop(cluster)
        assert not left, f"processes of the test Iris cluster outlived it (killed now): {left}"


@pytest.fixture
def iris_env(iris_cluster: IrisCluster, monkeypatch: pytest.MonkeyPatch) -> IrisCluster:
    """IRIS_CONTROLLER_URL for this test; no developer rlaunch or Iris settings."""
    for name in [k for k in os.environ if k.startswith(("RLAUNCH_", "IRIS_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("IRIS_CONTROLLER_URL", iris_cluster.url)
    return iris_cluster


@pytest.fixture
def backend(iris_env: IrisCluster) -> Iterator[object]:
    from rlaunch.cluster.iris.backend import IrisBackend

    backend = IrisBackend(cluster_config=str(iris_env.config), scheduling_timeout_seconds=120)
    before = {s.job_id for s in backend.list_jobs()}
    yield backend
    left = [s.job_id for s in backend.list_jobs() if s.job_id not in before and not s.state.terminal]
    for job_id in left:
        backend.cancel(job_id, reason="test teardown")
    assert not left, f"jobs left running after the test (cancelled now): {left}"


@pytest.fixture
def home_under_tmp() -> Iterator[Path]:
    """A fresh directory under /tmp/ holding `venv`: this tier's environment reached through a path
    there, as it is when HOME (and so the runtime cache) lives under /tmp. The venv is linked, and its
    pyvenv.cfg is found next to the link, so `venv/bin/python` is a complete environment whose
    `sys.executable` stays under /tmp."""
    assert sys.prefix != sys.base_prefix, "the Iris tier runs in a virtualenv (tests/py312_tier.py)"
    root = Path(tempfile.mkdtemp(prefix="rlaunch-iris-home-", dir="/tmp"))
    (root / "venv").symlink_to(sys.prefix, target_is_directory=True)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
