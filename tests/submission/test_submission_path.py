"""Gate 1, one submission path: an RL step is launched only by the coordinator `@rl_build_options`
submits. A `@build_options` main, or the artifact runner called directly, refuses a graph that would
build one, before anything is built, naming `@rl_build_options`."""

from __future__ import annotations

import os
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from experiments import smoke
from rlaunch.artifacts import Runner
from rlaunch.artifacts.plan import SubmissionPathError
from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.cli import build_options
from tests.support.written_files import written

DAY = "2026.11.30"


def smoke_rl() -> object:
    """The CPU smoke's RL step (trl-cpu: no runtime plugin enters this process's registry)."""
    return smoke.rl_step(smoke.model_step(smoke.tokenizer_step()), smoke.dataset_step(), 1, steps=4)


@click.command()
@build_options
def plain_main() -> object:
    return smoke_rl()


@pytest.mark.parametrize("run", [True, False], ids=["run", "plan"])
def test_a_build_options_main_refuses_an_rl_step_before_building_anything(prefix: str, run: bool) -> None:
    done = CliRunner().invoke(plain_main, ["--version", DAY, *(["--run"] if run else [])])
    assert done.exit_code == 2, done.output
    assert "smoke/rl@2026.11.30 (launched only by @rl_build_options)" in done.output
    assert "decorate the experiment's main with @rl_build_options" in done.output
    assert written(Path(prefix)) == []  # not even the model and data steps before it


def test_the_artifact_runner_refuses_an_rl_step_it_would_build(prefix: str) -> None:
    with build_context(BuildContext(VersionCodex(DAY))):
        step = smoke_rl()
    with pytest.raises(SubmissionPathError, match="@rl_build_options"):
        Runner(prefix, report=lambda line: None).run([step])
    assert written(Path(prefix)) == []


def test_a_graph_without_rl_still_runs_under_build_options(prefix: str) -> None:
    from experiments.hello import main as hello

    done = CliRunner().invoke(hello, ["--version", DAY, "--run"])
    assert done.exit_code == 0, done.output
    assert os.path.isdir(prefix)
