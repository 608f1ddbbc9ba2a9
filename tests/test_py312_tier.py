"""The Python 3.12 tier machinery itself: how the interpreter is found or refused, and that tier
tests are collected only inside their tier."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.py312_tier import (
    PYTHON_ENV,
    REPO,
    TIER_ENV,
    Tier,
    collect_only_inside,
    find_python312,
    tier_command,
    tier_env,
)


def test_an_explicit_interpreter_that_is_not_312_is_an_error_not_a_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.version_info[:2] == (3, 12):
        pytest.skip("this interpreter is 3.12")
    monkeypatch.setenv(PYTHON_ENV, sys.executable)
    with pytest.raises(RuntimeError, match=PYTHON_ENV):
        find_python312()


def test_no_interpreter_anywhere_gives_a_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(PYTHON_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("HOME", str(tmp_path))
    found = find_python312()
    assert found.path is None and PYTHON_ENV in found.reason and "python3.12" in found.reason


def test_a_pyenv_shim_that_does_not_run_is_not_taken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    shim = tmp_path / "bin" / "python3.12"
    shim.parent.mkdir()
    shim.write_text("#!/bin/sh\necho 'pyenv: python3.12: command not found' >&2\nexit 127\n")
    shim.chmod(0o755)
    monkeypatch.delenv(PYTHON_ENV, raising=False)
    monkeypatch.setenv("PATH", str(shim.parent))
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "pyenv"))
    monkeypatch.setenv("HOME", str(tmp_path))
    found = find_python312()
    assert found.path is None and "command not found" in found.reason


def test_tier_tests_are_collected_only_inside_their_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIER_ENV, raising=False)
    assert collect_only_inside("skyrl") == ["*"]
    monkeypatch.setenv(TIER_ENV, "skyrl")
    assert collect_only_inside("skyrl") == [] and collect_only_inside("iris") == ["*"]


def test_the_sub_suite_runs_this_checkout_under_its_marker(tmp_path: Path) -> None:
    tier = Tier("demo", tmp_path / "lock.txt", ("tests/contract/demo",))
    argv = tier_command(tier, "/venv/bin/python", "-x")
    assert argv[:3] == ["/venv/bin/python", "-m", "pytest"] and argv[-1] == "tests/contract/demo"
    assert argv[argv.index("-m", 3) + 1] == "demo"
    env = tier_env(tier)
    assert env[TIER_ENV] == "demo" and env["PYTHONPATH"].endswith("/src")


def test_the_iris_tier_environment_carries_every_dependency_of_rlaunch() -> None:
    """Iris coordinators run in the tier's environment with rlaunch from the checkout: a dependency rlaunch
    needs (uv, to build a runtime) missing there fails only when no earlier test left the runtime built."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    from rlaunch.runtimes.lockfile import read_lock_file
    from tests.test_iris_tier import IRIS

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    needed = {canonicalize_name(Requirement(r).name): Requirement(r) for r in project["dependencies"]}
    pinned = {p.name: p for p in read_lock_file(str(IRIS.lock))}
    missing = sorted(name for name in needed if name not in pinned)
    assert not missing, f"{IRIS.lock} lacks {missing}: add them to requirements.in beside it and regenerate the lock"
    outside = sorted(
        f"{name}=={pinned[name].version} (rlaunch needs {needed[name].specifier})"
        for name in needed
        if not needed[name].specifier.contains(pinned[name].version, prereleases=True)
    )
    assert not outside, f"{IRIS.lock} pins versions rlaunch does not accept: {outside}"
