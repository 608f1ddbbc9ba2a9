"""The smoke gate end to end on the marker runtime: refuse, accept, override, and `rlaunch parity`."""

from __future__ import annotations

import json

import pytest

from tests.support.launchers import Launcher

pytestmark = [pytest.mark.parity, pytest.mark.e2e]

DAY = "2026.11.30"
GATED = "tests.experiments.gated"
SMOKE = "tests.experiments.marker"


def _run_record(launcher: Launcher, name: str) -> dict | None:
    path = launcher.prefix / name / DAY / "run_record.json"
    return json.loads(path.read_text()) if path.exists() else None


def _jobs(launcher: Launcher) -> list:
    root = launcher.prefix / ".jobs"
    return launcher.backend().list_jobs() if root.exists() else []


def test_gate_refuses_without_a_smoke_run_and_submits_nothing(launcher: Launcher) -> None:
    done = launcher.run("-m", GATED, "--version", DAY, "--run")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "smoke marker/rl@2026.11.30 has not run" in done.stderr
    assert "Nothing was submitted." in done.stderr
    assert _jobs(launcher) == []
    assert _run_record(launcher, "gated/rl") is None


def test_gate_refuses_a_smoke_that_failed_verify_smoke(launcher: Launcher) -> None:
    failed = launcher.run("-m", SMOKE, "--version", DAY, "--scenario", "fail_at_3", "--run")
    assert failed.returncode != 0
    done = launcher.run("-m", GATED, "--version", DAY, "--run")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "does not pass verify-smoke: run succeeded" in done.stderr
    assert [j for j in _jobs(launcher) if "gated" in j.name] == []


def test_gate_accepts_after_a_passing_smoke_and_parity_holds(launcher: Launcher) -> None:
    smoke = launcher.run("-m", SMOKE, "--version", DAY, "--run")
    assert smoke.returncode == 0, smoke.stdout + smoke.stderr
    refused = launcher.run("-m", GATED, "--version", DAY, "--mismatch", "export", "--run")
    assert refused.returncode == 2
    assert "[export] export_hf: smoke True, large False" in refused.stderr
    done = launcher.run("-m", GATED, "--version", DAY, "--run")
    assert done.returncode == 0, done.stdout + done.stderr
    record = _run_record(launcher, "gated/rl")
    assert record["attempts"][-1]["state"] == "succeeded"
    assert "smoke_gate_overrides" not in record
    same = launcher.run("-m", "rlaunch", "parity", f"marker/rl@{DAY}", f"gated/rl@{DAY}")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "parity holds" in same.stdout


def test_override_submits_and_keeps_the_reason(launcher: Launcher) -> None:
    """Parity is judged against the document the smoke ran (what the host can read too)."""
    assert launcher.run("-m", SMOKE, "--version", DAY, "--run").returncode == 0
    done = launcher.run(
        "-m", GATED, "--version", DAY, "--mismatch", "resume", "--run", "--skip-smoke-gate", "hotfix rehearsed by hand"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    overrides = _run_record(launcher, "gated/rl")["smoke_gate_overrides"]
    assert len(overrides) == 1
    entry = overrides[0]
    assert entry["reason"] == "hotfix rehearsed by hand"
    assert entry["smoke"] == f"marker/rl@{DAY}"
    assert [p for p in entry["problems"] if "parity" in p] == [
        f"parity with smoke marker/rl@{DAY}: [checkpoint] resume_mode: smoke 'latest', large 'none'"
    ]
    assert not any("has not run" in p for p in entry["problems"])
    assert entry["by"]["user"] and entry["at"]


def test_an_empty_override_reason_is_refused(launcher: Launcher) -> None:
    done = launcher.run("-m", GATED, "--version", DAY, "--run", "--skip-smoke-gate", " ")
    assert done.returncode == 2
    assert "Invalid value for '--skip-smoke-gate': needs a reason (it is kept in the run record)" in done.stderr
    assert _jobs(launcher) == []


def test_parity_command_names_the_difference_between_stored_runs(launcher: Launcher) -> None:
    assert launcher.run("-m", SMOKE, "--version", DAY, "--run").returncode == 0
    other = launcher.run("-m", SMOKE, "--version", "2026.12.01", "--no-export", "--run")
    assert other.returncode == 0, other.stdout + other.stderr
    done = launcher.run("-m", "rlaunch", "parity", f"marker/rl@{DAY}", "marker/rl@2026.12.01")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "[export] export_hf: smoke True, large False" in done.stdout
    # Both per-device memory tables, side by side: the marker model records no config.json.
    assert "memory per device (smoke | large)" in done.stdout
    assert "smoke: cannot size the model" in done.stdout and "large: cannot size the model" in done.stdout
    missing = launcher.run("-m", "rlaunch", "parity", f"marker/rl@{DAY}", "nothing/here@2026.12.01")
    assert missing.returncode == 2
