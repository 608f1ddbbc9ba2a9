"""A checkpoint written by another runtime digest, or under another run fingerprint (a changed
recipe), is never resumed: the plan says so and `--run` refuses before anything is submitted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.launchers import Launcher, copied_marker_launcher, release_copied_marker

pytestmark = pytest.mark.launch

VERSION = "2026.11.30"
MARKER = ("-m", "tests.experiments.marker", "--version", VERSION, "--scenario", "fail_at_3")


def test_changed_runtime_digest_refuses_resume_in_plan_and_run(tmp_path: Path) -> None:
    launcher = copied_marker_launcher(tmp_path)

    failed = launcher.run(*MARKER, "--run")
    assert failed.returncode != 0  # fails at step 3, after committing the step-2 checkpoint
    assert next(launcher.prefix.glob(".tmp/*/marker/rl/*/checkpoints/latest")).read_text() == "2"
    plan = launcher.run(*MARKER)
    assert plan.returncode == 0 and "would resume step 2 (same run fingerprint" in plan.stdout

    release_copied_marker(tmp_path)
    replan = launcher.run(*MARKER)
    assert replan.returncode == 0
    assert "REFUSED" in replan.stdout and "fresh RL artifact version" in replan.stdout

    jobs_before = len(launcher.backend().list_jobs())
    refused = launcher.run(*MARKER, "--run")
    assert refused.returncode == 2
    assert "fresh RL artifact version" in refused.stderr and "Nothing was submitted." in refused.stderr
    assert len(launcher.backend().list_jobs()) == jobs_before

    fresh = launcher.run(
        "-m", "tests.experiments.marker", "--version", VERSION, "--override", "marker/rl=2026.11.30.1", "--run"
    )
    assert fresh.returncode == 0, fresh.stderr[-3000:]


def test_a_changed_recipe_refuses_resume_in_plan_and_run(tmp_path: Path) -> None:
    """Steps 1-2 from recipe A must not be continued by recipe B under the same artifact identity."""
    launcher = Launcher(tmp_path / "prefix", {})
    failed = launcher.run(*MARKER, "--run")
    assert failed.returncode != 0
    # The coordinator's output says why the step failed in one line, without rlaunch's own traceback.
    output = failed.stdout + failed.stderr
    assert "  FAILED marker/rl@2026.11.30: LaunchFailedError: RL attempt " in output
    assert "replica 0 failed: exit code 3" in output and "Traceback" not in output, output[-3000:]
    assert next(launcher.prefix.glob(".tmp/*/marker/rl/*/checkpoints/latest")).read_text() == "2"

    changed = ("-m", "tests.experiments.marker", "--version", VERSION, "--scenario", "ok")  # another recipe
    plan = launcher.run(*changed)
    assert plan.returncode == 0, plan.stderr[-3000:]
    (line,) = [line for line in plan.stdout.splitlines() if line.startswith("resume")]
    assert "REFUSED" in line and "run fingerprint" in line and "(this run: " in line

    jobs_before = len(launcher.backend().list_jobs())
    refused = launcher.run(*changed, "--run")
    assert refused.returncode == 2
    assert "run fingerprint" in refused.stderr and "Nothing was submitted." in refused.stderr
    assert len(launcher.backend().list_jobs()) == jobs_before

    same = launcher.run(*MARKER)  # the recipe that wrote the checkpoint may still resume it
    assert "would resume step 2 (same run fingerprint" in same.stdout
