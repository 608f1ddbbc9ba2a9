"""Fixtures shared across test packages."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlaunch import storage
from tests.documents import rendered_document
from tests.launching import Launcher

# Developer settings a test must not inherit: where runs go, how jobs are reached, credentials.
UNSET = (
    "RLAUNCH_PREFIX",
    "RLAUNCH_TEMP_PREFIX",
    "RLAUNCH_REGION",
    "RLAUNCH_JOB_ID",
    "RLAUNCH_BACKEND",
    "RAY_ADDRESS",
    "WANDB_API_KEY",
)


def isolated_prefix(monkeypatch: pytest.MonkeyPatch, root: Path) -> str:
    """Clear the developer's settings (`UNSET`), run from `root/cwd` and export `root/prefix` as
    RLAUNCH_PREFIX; the prefix's path."""
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)
    work = root / "cwd"
    work.mkdir(exist_ok=True)
    monkeypatch.chdir(work)
    prefix = root / "prefix"
    monkeypatch.setenv(storage.PREFIX_ENV, str(prefix))
    return str(prefix)


@pytest.fixture
def prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh local storage prefix exported as RLAUNCH_PREFIX, run from a working directory of its
    own; none of the developer's settings (`UNSET`) leak in."""
    return isolated_prefix(monkeypatch, tmp_path)


@pytest.fixture
def document(prefix: str) -> dict[str, Any]:
    """The seed's 64-GPU launch document as plain data (8 nodes x 8 H100, policy 4 x 8, four DP8
    engines, seed 17), rendered for a run into `prefix`."""
    return rendered_document(prefix)


@pytest.fixture(scope="module")
def module_prefix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`prefix` shared by all tests of a module, for modules that build costly documents once."""
    monkeypatch = pytest.MonkeyPatch()
    yield isolated_prefix(monkeypatch, tmp_path_factory.mktemp("module"))
    monkeypatch.undo()


@pytest.fixture
def signal_handlers() -> Iterator[None]:
    """The host and a Ray-driver task install their own SIGTERM/SIGINT/SIGHUP handlers: put pytest's back."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.fixture
def launcher(tmp_path: Path) -> Iterator[Launcher]:
    runner = Launcher(tmp_path / "prefix", {})
    yield runner
    jobs_root = runner.prefix / ".jobs"
    if jobs_root.exists():
        backend = runner.backend()
        for job in backend.list_jobs():
            if not job.state.terminal:
                backend.cancel(job.job_id, reason="test teardown")


# The markers that say what a test costs (pyproject.toml declares them). A test carrying none of them
# is a unit or rule test: it gets `fast`, the edit-test loop's lane (`pytest -m fast`).
COSTLY = (
    "e2e", "launch", "runtime", "property", "promises", "parity", "memtracker",
    "ray", "multinode", "skyrl", "iris", "slurm",
)  # fmt: skip
# Fixtures whose cost their tests inherit, so a new test that uses one cannot land in the fast lane; a
# Hypothesis test (`@given`) is a `property` search.
COSTLY_FIXTURES = {"trl_env": "runtime", "launcher": "launch"}


# pytest-xdist (`-n N --dist loadgroup`, the README's test command) sends each group to one worker:
# a cluster tier starts one cluster per worker that runs it (Ray and the multinode gangs share one
# group, so two Ray clusters never start at once), the observe lab launches its runs once per worker,
# and a costly module keeps its module-scoped fixture to one worker. Independent tests (the fast
# lane, Hypothesis searches, the promise meta-tier's subprocesses) are spread one by one.
TIER_GROUPS = {"slurm": "slurm", "ray": "ray", "multinode": "ray", "iris": "iris", "skyrl": "skyrl"}
SHARED_FIXTURE_GROUPS = {"lab": "observe-lab"}
SPREAD = ("fast", "property", "promises")


def give_lane(item: pytest.Item) -> None:
    """Mark `item` with the cost its markers, fixtures and Hypothesis imply, or `fast`."""
    if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
        item.add_marker("property")  # a Hypothesis search: hundreds of examples
    for fixture, marker in COSTLY_FIXTURES.items():
        if fixture in getattr(item, "fixturenames", ()):
            item.add_marker(marker)
    if not any(item.get_closest_marker(name) for name in COSTLY):
        item.add_marker("fast")


def xdist_group(item: pytest.Item) -> str | None:
    """The worker group `item` must share (see TIER_GROUPS); None: any worker may run it."""
    for marker, group in TIER_GROUPS.items():
        if item.get_closest_marker(marker):
            return group
    for fixture, group in SHARED_FIXTURE_GROUPS.items():
        if fixture in getattr(item, "fixturenames", ()):
            return group
    if any(item.get_closest_marker(name) for name in SPREAD):
        return None
    return item.nodeid.partition("::")[0]  # a launch, runtime or parity module: its fixtures once


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        give_lane(item)
        group = xdist_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
