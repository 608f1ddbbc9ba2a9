"""A run observed while RUNNING (never a success), watched, then cancelled with a record of who and when."""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
import threading

import pytest

from rlaunch.cluster.local.backend import LocalBackend
from tests.support.polling import wait_for

from .conftest import RL
from .lab import REPO, Lab
from .test_run_states import failing, verdict

pytestmark = pytest.mark.launch

VERSION = "2026.11.10"


def test_running_run_fails_verify_then_cancel_stops_both_jobs_and_records_who(lab: Lab) -> None:
    run = f"{RL}@{VERSION}"
    assert lab.marker(VERSION, "slow", steps=200, detach=True).wait(60) == 0

    def advancing() -> dict | None:
        result = lab.rlaunch("status", run, "--json")
        if result.exit_code != 0:
            return None  # the detached coordinator has not reached the RL step yet
        s = json.loads(result.output)
        return s if s["steps"]["count"] >= 2 else None

    s = wait_for(advancing, 60, "two optimizer steps")
    assert s["state"] == "running" and not s["is_terminal"]
    assert s["coordinator"]["state"] == "running" and s["child"]["state"] == "running"
    assert s["steps"]["steps_per_minute"] > 0 and s["steps"]["final_step"] == 200
    pace = s["steps"]["pace"]  # the marker's slow scenario logs a step every half second
    assert pace["waiting"] is None and 0.3 < pace["seconds_per_step"] < 5 and pace["over_steps"] >= 1
    assert pace["remaining_steps"] == 200 - s["steps"]["latest_step"]
    assert pace["eta_seconds"] == pytest.approx(pace["remaining_steps"] * pace["seconds_per_step"])
    shown = lab.rlaunch("status", run).output.splitlines()
    rate = next(line.split()[1:] for line in shown if line.split()[:1] == ["rate"])
    assert rate[1:2] == ["steps/h"] and rate[3:6] == ["s/step)", "over", "the"], rate
    eta = next(line.split()[1:] for line in shown if line.split()[:1] == ["ETA"])
    assert eta[-3:] == ["steps", "to", "go)"] and eta[eta.index("at") + 1].endswith("+00:00"), eta

    code, criteria = verdict(lab, run)
    bad = failing(criteria)
    assert code == 1
    assert "state running: a run that has not ended is not a success" in bad["run succeeded"]
    assert "of the configured final step 200" in bad["optimizer steps advance"]
    assert "no terminal manifest" in bad["terminal checkpoint/export metadata exists"]

    logs = lab.rlaunch("logs", run, "--replica", "0")
    assert logs.exit_code == 0 and "joined gang as rank 0 of 1" in logs.output and "[rank 0]" not in logs.output

    watcher = subprocess.Popen(
        [sys.executable, "-m", "rlaunch", "status", run, "--watch", "--interval", "0.3"],
        cwd=REPO, env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(watcher.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        wait_for(lambda: any("refreshing every" in line for line in lines), 30, "the first --watch refresh")
        declined = lab.rlaunch("cancel", run, input="n\n")
        assert declined.exit_code == 1 and "Cancel marker/rl@2026.11.10 attempt" in declined.output
        running = lab.status(run)
        assert running["state"] == "running"

        done = lab.rlaunch("cancel", run, "--yes", "--reason", "observe test stops it")
        assert done.exit_code == 0, done.output
        assert "cancelled" in done.output and "recorded in" in done.output
        watcher.wait(timeout=60)
        reader.join(timeout=10)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert watcher.returncode == 0, watcher.stderr.read()
    renders = "".join(lines).split("run          ")[1:]
    assert len(renders) >= 2 and renders[0].splitlines()[1] == "state        running"
    assert renders[-1].splitlines()[1].startswith("state        cancelled") and "refreshing" not in renders[-1]

    s = lab.status(run)
    assert s["state"] == "cancelled" and s["coordinator"]["state"] == "cancelled" and s["child"]["state"] == "cancelled"
    assert s["cancelled"]["by"].startswith(getpass.getuser() + "@") and s["cancelled"]["at"]
    assert s["cancelled"]["reason"] == "observe test stops it"
    before = running["phases"]  # read from the record and the attempt directory while it ran
    assert {"child_submitted", "replica_0_joined", "inputs_staged", "first_optimizer_step"} <= set(before)
    assert {k: s["phases"][k] for k in before} == before  # every phase shown before the cancel is still shown
    assert s["phases"]["cancelled"] == s["cancelled"]["at"]
    assert {"trainer_started", "trainer_exited"} <= set(s["phases"])  # the stopped trainer's times (gang/stopped.json)
    phase_rows = lab.rlaunch("status", run).output.split("phases")[1].split("fingerprint")[0]
    assert all(f" {name} " in phase_rows for name in s["phases"]), phase_rows
    attempt = lab.run_record(RL, VERSION)["attempts"][-1]
    assert attempt["state"] == "cancelled" and attempt["cancelled"]["by"]["user"] == getpass.getuser()
    record = json.loads((lab.output_path(RL, VERSION) / "cancellations" / f"{attempt['attempt_id']}.json").read_text())
    assert (
        record["jobs"] == [attempt["coordinator_job_id"], attempt["child_job_id"]]
        and record["reason"] == "observe test stops it"
    )
    assert attempt["cancelled"]["states_after"][attempt["coordinator_job_id"]] == "cancelled"
    job = LocalBackend(lab.jobs_root).status(attempt["coordinator_job_id"])
    assert "rlaunch cancel by" in (job.message or "") and "observe test stops it" in (job.message or "")

    code, criteria = verdict(lab, run)
    assert code == 1 and "state cancelled" in failing(criteria)["run succeeded"]
    again = lab.rlaunch("cancel", run, "--yes")
    assert again.exit_code == 0 and "nothing to cancel" in again.output
    assert "cancelled by" in lab.rlaunch("status", run).output


def test_a_run_whose_coordinator_has_not_reached_the_rl_step_is_pending_and_cancellable(lab: Lab) -> None:
    """Between `--run --detach` and the run record there is only the coordinator job, labelled
    with the artifact it builds; here a real local job carries the coordinator's labels (the
    marker experiment gets through that window too quickly to observe it reliably)."""
    from rlaunch.cluster.protocol import JobSpec

    version = "2026.11.11"
    backend = LocalBackend(lab.jobs_root, kill_grace=1.0)
    job_id = backend.submit(
        JobSpec(
            name=f"marker-rl-{version}-coordinator-test",
            argv=(sys.executable, "-c", "import time; time.sleep(120)"),
            labels={"rlaunch.kind": "coordinator", "rlaunch.artifact": f"{RL}@{version}"},
        )
    )
    s = lab.status(f"{RL}@{version}")
    assert s["state"] == "pending" and "has not reached the RL step" in s["state_reason"]
    assert s["coordinator"]["job_id"] == job_id and s["coordinator"]["state"] in ("pending", "running")
    assert lab.rlaunch("verify-smoke", f"{RL}@{version}").exit_code == 1
    done = lab.rlaunch("cancel", f"{RL}@{version}", "--yes")
    assert done.exit_code == 0 and "(none recorded yet): cancelled" in done.output, done.output
    assert backend.status(job_id).state.value == "cancelled"
    record = json.loads((lab.output_path(RL, version) / "cancellations" / f"before-attempt-{job_id}.json").read_text())
    assert record["by"]["user"] == getpass.getuser() and record["jobs"] == [job_id]
