"""`rlaunch runs`, references by job id and path, `logs`, `plot`, attempts, speed and imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.polling import wait_for

from .conftest import RL, Runs
from .lab import REPO, Lab

pytestmark = pytest.mark.launch


def test_runs_lists_every_run_newest_first_with_state_and_ids(lab: Lab, runs: Runs) -> None:
    result = lab.rlaunch("runs", "--json", "--name", "marker/rl")
    rows = {r["artifact"]: r for r in json.loads(result.output)}
    states = {rows[f"{RL}@{v}"]["state"] for v in (runs.fail_at_3, runs.no_steps, runs.never_joined)}
    assert states == {"failed"}
    assert rows[f"{RL}@{runs.ok}"]["state"] == rows[f"{RL}@{runs.wrong_model}"]["state"] == "succeeded"
    ok = rows[f"{RL}@{runs.ok}"]
    record = lab.run_record(RL, runs.ok)["attempts"][-1]
    assert (ok["coordinator_job_id"], ok["child_job_id"], ok["attempt_id"]) == (
        record["coordinator_job_id"], record["child_job_id"], record["attempt_id"],
    )  # fmt: skip
    submitted = [r["submitted_at"] for r in json.loads(result.output)]
    assert submitted == sorted(submitted, reverse=True)
    text = lab.rlaunch("runs").output.splitlines()
    assert text[0].split() == ["ARTIFACT", "STATE", "ATTEMPT", "SUBMITTED", "COORDINATOR", "CHILD"]
    assert json.loads(lab.rlaunch("runs", "--json", "--name", "nothing/").output) == []


def test_status_accepts_a_job_id_or_the_artifact_path(lab: Lab, runs: Runs) -> None:
    record = lab.run_record(RL, runs.ok)["attempts"][-1]
    expected = (str(lab.output_path(RL, runs.ok)), record["attempt_id"])
    for reference in (record["child_job_id"], record["coordinator_job_id"], str(lab.output_path(RL, runs.ok))):
        s = lab.status(reference)
        assert (s["output_path"], s["attempt_id"]) == expected, reference
        assert s["artifact"] == f"{RL}@{runs.ok}"


def test_unknown_runs_are_one_line_errors(lab: Lab, runs: Runs) -> None:
    missing = lab.rlaunch("verify-smoke", f"{RL}@2099.01.01")
    assert missing.exit_code == 2 and "no RL run marker/rl@2099.01.01 under" in missing.output
    assert lab.rlaunch("status", "no-such-job-abc123").exit_code == 2
    other = lab.rlaunch("status", f"{RL}@{runs.ok}", "--attempt", "feedfeedfeed")
    assert other.exit_code == 2 and "has no attempt 'feedfeedfeed'" in other.output


def test_logs_show_the_child_gang_one_replica_or_the_coordinator(lab: Lab, runs: Runs) -> None:
    run = f"{RL}@{runs.never_joined}"
    both = lab.rlaunch("logs", run).output
    assert "[rank 0]" in both and "[rank 1]" in both
    rank1 = lab.rlaunch("logs", run, "--replica", "1").output
    assert "[rank " not in rank1 and "FileExistsError" in rank1
    assert len(lab.rlaunch("logs", run, "--tail", "1").output.splitlines()) == 1
    coordinator = lab.rlaunch("logs", run, "--coordinator").output
    assert f"building {RL}@{runs.never_joined}" in coordinator
    assert lab.rlaunch("logs", run, "--replica", "5").exit_code == 1


def test_plot_draws_reward_loss_and_kl_as_png(lab: Lab, runs: Runs, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "curves.png"
    result = lab.rlaunch("plot", f"{RL}@{runs.ok}", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "reward, loss, KL over 4 optimizer steps" in result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    empty = lab.rlaunch("plot", f"{RL}@{runs.no_steps}", "-o", str(tmp_path / "none.png"))
    assert empty.exit_code == 1 and "no optimizer steps recorded yet" in empty.output


def test_a_retried_run_appends_an_attempt_that_resumes_and_passes(lab: Lab, tmp_path) -> None:
    version = "2026.11.20"
    assert lab.marker(version, "flaky_at_3").wait(180) != 0
    retried = lab.marker(version, "flaky_at_3", retry="transient fault at step 3")
    assert retried.wait(180) == 0, lab.launch_log("tests.experiments.marker", version)
    first, second = lab.run_record(RL, version)["attempts"]
    assert (first["state"], second["state"]) == ("failed", "succeeded")
    s = lab.status(f"{RL}@{version}")
    assert (s["attempt_id"], s["attempt_number"], s["attempts_total"]) == (second["attempt_id"], 2, 2)
    assert s["steps"]["first_step"] == 3 and s["steps"]["latest_step"] == 4
    assert lab.rlaunch("verify-smoke", f"{RL}@{version}").exit_code == 0
    old = lab.rlaunch("verify-smoke", f"{RL}@{version}", "--attempt", first["attempt_id"])
    assert old.exit_code == 1 and "state failed" in old.output
    pytest.importorskip("matplotlib")
    out = lab.rlaunch("plot", f"{RL}@{version}", "-o", str(tmp_path / "both.png")).output
    assert "over 4 optimizer steps" in out  # attempt 1's steps 1-2 and attempt 2's steps 3-4


def test_status_of_a_finished_run_renders_without_heavy_imports(lab: Lab, runs: Runs) -> None:
    """Speed lives in benchmarks/smoke_overhead.py (it times `rlaunch status`); this pins what makes it fast."""
    run = f"{RL}@{runs.ok}"
    done = lab.rlaunch_process("status", run)
    assert done.returncode == 0 and "state        succeeded" in done.stdout, done.stderr
    probe = (
        "import sys\nfrom rlaunch.cli.admin import main\n"
        f"try:\n    main(['status', {run!r}])\nexcept SystemExit:\n    pass\n"
        "heavy = ('matplotlib', 'rich', 'torch', 'ray', 'transformers', 'trl', 'numpy')\n"
        "print('HEAVY', sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, env=lab.env, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip().splitlines()[-1] == "HEAVY []", out.stdout + out.stderr


def test_watch_on_a_finished_run_renders_once_and_returns(lab: Lab, runs: Runs) -> None:
    result = lab.rlaunch("status", f"{RL}@{runs.ok}", "--watch", "--interval", "5")
    assert result.exit_code == 0 and result.output.count("state        succeeded") == 1
    lines = wait_for(
        lambda: lab.rlaunch("status", f"{RL}@{runs.ok}", "--watch", "--json").output.splitlines(), 5, "json"
    )
    assert len(lines) == 1 and json.loads(lines[0])["smoke"]["ok"] is True
