"""Step jobs through the real `--run` path: the coordinator submits a step job as its child on
the local backend, `rlaunch jobs` and `rlaunch status` show it, and a failed step job is refused
again before anything is submitted until `--retry REASON` authorises it (kept in the run record)."""

from __future__ import annotations

import json

import pytest

from tests.support.launchers import Launcher
from tests.support.polling import wait_for

DAY = "2026.11.30"
MARKER = ("-m", "tests.experiments.marker", "--version", DAY, "--step-job")


def attempts(launcher: Launcher) -> list[dict]:
    return json.loads((launcher.prefix / "marker/count" / DAY / "run_record.json").read_text())["attempts"]


@pytest.mark.e2e
def test_the_coordinator_runs_a_step_job_as_its_child(launcher: Launcher) -> None:
    done = launcher.run(*MARKER, "--run")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (attempt,) = attempts(launcher)
    jobs = {j.job_id: j for j in launcher.backend().list_jobs()}
    step_job, coordinator = jobs[attempt["child_job_id"]], jobs[attempt["coordinator_job_id"]]
    assert step_job.parent == coordinator.job_id and coordinator.labels["rlaunch.kind"] == "coordinator"
    assert step_job.state.value == "succeeded" and attempt["state"] == "succeeded" and attempt["backend"] == "local"
    record = json.loads((launcher.prefix / "marker/count" / DAY / ".artifact.json").read_text())
    assert record["result"]["rows"] == 8 and "_staging" in record["result"]["data"]  # the staged copy was read
    assert step_job.job_id in launcher.run("-m", "rlaunch", "jobs", "list").stdout
    status = launcher.run("-m", "rlaunch", "status", f"marker/count@{DAY}").stdout
    assert "state        succeeded" in status and step_job.job_id in status and coordinator.job_id in status
    verdict = launcher.run("-m", "rlaunch", "verify-smoke", f"marker/count@{DAY}")
    assert verdict.returncode == 2 and "is a step job, not an RL run" in verdict.stderr, verdict.stderr


@pytest.mark.e2e
def test_a_failed_step_job_is_relaunched_only_with_retry(launcher: Launcher) -> None:
    needs = launcher.prefix.parent / "fixed"
    failing = (*MARKER, "--step-job-needs", str(needs), "--run")
    first = launcher.run(*failing)
    assert first.returncode == 1, first.stdout[-3000:]
    (failed,) = attempts(launcher)
    assert failed["state"] == "failed" and failed["failure_class"]["cause"] == "data-format error"
    status = launcher.run("-m", "rlaunch", "status", f"marker/count@{DAY}").stdout
    assert "failed as    deterministic: data-format error" in status

    needs.write_text("fixed")
    refused = launcher.run(*failing)
    assert refused.returncode == 2 and "Nothing was submitted." in refused.stderr, refused.stdout + refused.stderr
    assert f"marker/count@{DAY}: retry: the latest attempt {failed['attempt_id']} failed" in refused.stderr
    assert len(attempts(launcher)) == 1

    retried = launcher.run(*failing, "--retry", "the data file is fixed")
    assert retried.returncode == 0, retried.stdout[-3000:] + retried.stderr[-3000:]
    first_attempt, second = attempts(launcher)
    assert second["state"] == "succeeded" and second["retry"]["reason"] == "the data file is fixed"


@pytest.mark.e2e
def test_rlaunch_cancel_stops_a_running_step_job_and_a_relaunch_needs_retry(launcher: Launcher) -> None:
    waiting = (*MARKER, "--step-job-waits-for", str(launcher.prefix.parent / "never"), "--run")
    started = launcher.run(*waiting, "--detach")
    assert started.returncode == 0, started.stdout[-3000:] + started.stderr[-3000:]
    record = launcher.prefix / "marker/count" / DAY / "run_record.json"
    wait_for(lambda: record.exists() and attempts(launcher)[-1]["state"] == "running", timeout=120, what="the step job")
    cancel = launcher.run("-m", "rlaunch", "cancel", f"marker/count@{DAY}", "--yes", "--reason", "test stops it")
    assert cancel.returncode == 0 and "cancelled" in cancel.stdout, cancel.stdout + cancel.stderr
    (attempt,) = attempts(launcher)
    backend = launcher.backend()
    assert backend.wait(attempt["coordinator_job_id"], timeout=60).state.value == "cancelled"
    assert backend.wait(attempt["child_job_id"], timeout=60).state.value == "cancelled"
    (attempt,) = attempts(launcher)
    assert attempt["state"] == "cancelled" and attempt["cancelled"]["reason"] == "test stops it"
    status = launcher.run("-m", "rlaunch", "status", f"marker/count@{DAY}").stdout
    assert "state        cancelled" in status and "test stops it" in status

    refused = launcher.run(*waiting)
    assert refused.returncode == 2 and f"attempt {attempt['attempt_id']} cancelled" in refused.stderr, refused.stderr
