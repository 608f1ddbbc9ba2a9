"""`--run` refuses before anything is submitted when the prefix cannot be written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from rlaunch.skyrl.views.submission import submission_problems

from rlaunch import storage
from rlaunch.cli import rl_build_options
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.skyrl import LocalSkyRLExecution, skyrl_step
from rlaunch.skyrl.plan.stored_facts import StoredFacts

from .helpers import DAY, planned_view, spec


@click.command()
@rl_build_options
def experiment() -> Any:
    return skyrl_step(spec(), LocalSkyRLExecution(), export_hf=True)


def _planned(prefix: str | None = None) -> tuple[PlannedLaunch, StoredFacts]:
    document, facts = planned_view(spec(), prefix=prefix)
    return PlannedLaunch.of(document), facts


@pytest.fixture
def unwritable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A prefix no one can create, root included: a file stands where its parent directory should be."""
    (tmp_path / "not-a-directory").write_text("x")
    prefix = tmp_path / "not-a-directory" / "prefix"
    monkeypatch.setenv(storage.PREFIX_ENV, str(prefix))
    return prefix


def test_an_unwritable_prefix_is_a_submission_problem(unwritable: Path) -> None:
    (problem, *_) = submission_problems(*_planned(), str(unwritable))
    assert f"{unwritable} is not writable" in problem and "RLAUNCH_PREFIX" in problem


def test_run_with_an_unwritable_prefix_submits_nothing(unwritable: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(experiment, ["--version", DAY, "--run"])
    assert result.exit_code == 2, result.output
    assert "is not writable" in result.stderr and "Nothing was submitted." in result.stderr
    assert "submitted RL coordinator" not in result.output
    assert not (tmp_path / "cwd" / "rlaunch-artifacts").exists()


def test_a_writable_prefix_is_no_problem(prefix: str) -> None:
    assert submission_problems(*_planned(prefix), prefix) == []
