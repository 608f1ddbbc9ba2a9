"""Fixtures shared across test packages."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlaunch import storage
from tests import scheduling
from tests.support.documents import rendered_document
from tests.support.launchers import Launcher

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


def give_lane(item: pytest.Item) -> None:
    """Mark `item` with the cost its markers, fixtures and Hypothesis imply, or `fast`."""
    if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
        item.add_marker("property")  # a Hypothesis search: hundreds of examples
    for fixture, marker in COSTLY_FIXTURES.items():
        if fixture in getattr(item, "fixturenames", ()):
            item.add_marker(marker)
    if not any(item.get_closest_marker(name) for name in COSTLY):
        item.add_marker("fast")


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by the lanes given here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        give_lane(item)
    scheduling.write_groups(config, items)  # on an xdist worker: each test's unit of work


# The README's test command runs under pytest-xdist (`-n N --dist loadgroup`): tests/scheduling.py.
GROUPS_KEY = pytest.StashKey[str]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    if GROUPS_KEY not in node.config.stash:
        node.config.stash[GROUPS_KEY] = scheduling.groups_directory()
    node.workerinput[scheduling.WORKER_INPUT] = node.config.stash[GROUPS_KEY]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup" or GROUPS_KEY not in config.stash:
        return None
    return scheduling.make_scheduler(config, log, config.stash[GROUPS_KEY])


def pytest_unconfigure(config: pytest.Config) -> None:
    if GROUPS_KEY in config.stash:
        shutil.rmtree(config.stash[GROUPS_KEY], ignore_errors=True)
