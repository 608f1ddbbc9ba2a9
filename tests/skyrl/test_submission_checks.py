"""`--run` refuses before anything is submitted when the prefix cannot be written, and the dry run
says so first: storage is a finding of the one judgement (`rlaunch.judgement.judge`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from rlaunch import storage
from rlaunch.cli import rl_build_options
from rlaunch.judgement.judge import Authorisations
from rlaunch.skyrl import LocalSkyRLExecution, skyrl_step
from rlaunch.submission.submission import judged_launch
from tests.support.specs import DAY, launch_of, spec


@click.command()
@rl_build_options
def experiment() -> Any:
    return skyrl_step(spec(), LocalSkyRLExecution(), export_hf=True)


@pytest.fixture
def unwritable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A prefix no one can create, root included: a file stands where its parent directory should be."""
    (tmp_path / "not-a-directory").write_text("x")
    prefix = tmp_path / "not-a-directory" / "prefix"
    monkeypatch.setenv(storage.PREFIX_ENV, str(prefix))
    return prefix


def _storage(prefix: str) -> list[str]:
    step = skyrl_step(spec(), LocalSkyRLExecution(), export_hf=True)
    return [f.line() for f in judged_launch(launch_of(step, prefix), Authorisations()) if f.gate == "storage"]


def test_an_unwritable_prefix_is_a_finding(unwritable: Path) -> None:
    (problem, *_) = _storage(str(unwritable))
    assert problem.startswith(f"storage: {unwritable}/") and "is not writable" in problem
    assert "RLAUNCH_PREFIX" in problem


def test_run_with_an_unwritable_prefix_submits_nothing_and_the_dry_run_says_why(
    unwritable: Path, tmp_path: Path
) -> None:
    plan = CliRunner().invoke(experiment, ["--version", DAY])
    assert plan.exit_code == 0, plan.output
    said = [line for line in plan.stdout.splitlines() if line.startswith("  refused: storage: ")]
    assert said, plan.stdout
    result = CliRunner().invoke(experiment, ["--version", DAY, "--run"])
    assert result.exit_code == 2, result.output
    assert "is not writable" in result.stderr and "Nothing was submitted." in result.stderr
    assert said[0].removeprefix("  refused: ") in result.stderr  # the same words
    assert "submitted RL coordinator" not in result.output
    assert not (tmp_path / "cwd" / "rlaunch-artifacts").exists()


def test_a_writable_prefix_is_no_finding_and_judging_it_writes_nothing(prefix: str) -> None:
    before = sorted(Path(prefix).rglob("*")) if Path(prefix).exists() else []
    assert _storage(prefix) == []
    after = sorted(Path(prefix).rglob("*")) if Path(prefix).exists() else []
    assert after == before
