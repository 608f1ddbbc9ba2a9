"""Gates 2 and 3 end to end on the marker runtime: a version is one runtime, and relaunching a
failed or cancelled version is an authorised retry. Both hold in the plan, at `--run` (nothing is
submitted) and in the host (`rlaunch launch --config` on the document itself)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.launchers import Launcher, copied_marker_launcher, release_copied_marker

pytestmark = pytest.mark.e2e

DAY = "2026.11.30"
MARKER = ("-m", "tests.experiments.marker", "--version", DAY)


def _record(launcher: Launcher, name: str = "marker/rl", version: str = DAY) -> dict:
    return json.loads((launcher.prefix / name / version / "run_record.json").read_text())


def _row(plan: str, label: str) -> str:
    (line,) = [line for line in plan.splitlines() if line.startswith(f"{label} ")]
    return line


def test_a_version_that_failed_before_its_first_checkpoint_is_refused_after_the_runtime_changed(
    tmp_path: Path,
) -> None:
    launcher = copied_marker_launcher(tmp_path)
    failed = launcher.run(*MARKER, "--scenario", "fail_at_1", "--run")
    assert failed.returncode != 0
    (attempt,) = _record(launcher)["attempts"]
    old_digest = attempt["runtime_digest"]
    assert attempt["state"] == "failed" and old_digest  # every attempt carries its runtime digest
    assert not list(launcher.prefix.glob(".tmp/*/marker/rl/*/checkpoints/latest"))  # no checkpoint to guard it

    release_copied_marker(tmp_path)
    plan = launcher.run(*MARKER, "--scenario", "fail_at_1")
    assert plan.returncode == 0, plan.stderr[-3000:]
    version = _row(plan.stdout, "version")
    assert "REFUSED" in version and old_digest[:16] in version and "Launch a new version" in version
    assert _row(plan.stdout, "resume").endswith("no checkpoint yet")

    jobs = len(launcher.backend().list_jobs())
    refused = launcher.run(*MARKER, "--scenario", "fail_at_1", "--run", "--retry", "new runtime")
    assert refused.returncode == 2
    assert "a version is one runtime" in refused.stderr and "Nothing was submitted." in refused.stderr
    assert len(launcher.backend().list_jobs()) == jobs

    fresh = launcher.run(*MARKER, "--override", "marker/rl=2026.11.30.1", "--run")
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    (new,) = _record(launcher, version="2026.11.30.1")["attempts"]
    assert new["state"] == "succeeded" and new["runtime_digest"] != old_digest


def test_a_failed_version_is_relaunched_only_with_an_authorised_retry(launcher: Launcher) -> None:
    flaky = (*MARKER, "--scenario", "flaky_at_3")  # fails at step 3 once; the retry resumes from step 2
    failed = launcher.run(*flaky, "--run")
    assert failed.returncode != 0
    plan = launcher.run(*flaky)
    assert "a retry: the latest attempt" in _row(plan.stdout, "retry")
    assert "refused: retry: the latest attempt" in plan.stdout and 'pass --retry "<reason>"' in plan.stdout

    jobs = len(launcher.backend().list_jobs())
    refused = launcher.run(*flaky, "--run")
    assert refused.returncode == 2
    assert "relaunching it is a retry" in refused.stderr and "Nothing was submitted." in refused.stderr
    assert len(launcher.backend().list_jobs()) == jobs
    assert launcher.run(*flaky, "--run", "--retry", " ").returncode == 2  # a reason is required

    retried = launcher.run(*flaky, "--run", "--retry", "node lost at step 3")
    assert retried.returncode == 0, retried.stderr[-3000:]
    first, second = _record(launcher)["attempts"]
    assert first["state"] == "failed" and "retry" not in first
    assert second["state"] == "succeeded"
    assert second["retry"]["reason"] == "node lost at step 3"
    assert second["retry"]["by"]["user"] and second["retry"]["at"]

    status = launcher.run("-m", "rlaunch", "status", f"marker/rl@{DAY}")
    assert status.returncode == 0, status.stderr
    (line,) = [line for line in status.stdout.splitlines() if line.startswith("retry ")]
    assert "authorised by" in line and "node lost at step 3" in line
    assert "not a retry" in _row(launcher.run(*flaky).stdout, "retry")  # served now
