"""`rlaunch jobs list|status|cancel` over the local backend."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlaunch.cli.admin import main
from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.cluster.protocol import JobSpec, JobState

from .helpers import env_with_root, py, wait_for

SLEEP = py("import time; print('up', flush=True); time.sleep(60)")


def run(*args: str, input: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["jobs", *args], input=input)
    return result.exit_code, result.output


def test_list_and_status(backend: LocalBackend) -> None:
    assert run("list") == (0, "no jobs\n")
    job_id = backend.submit(JobSpec(name="listed", argv=SLEEP, replicas=2, labels={"team": "rl"}))
    wait_for(lambda: backend.status(job_id).state == JobState.RUNNING)

    code, out = run("list")
    assert code == 0
    header, row = out.splitlines()
    assert header.split() == ["JOB", "STATE", "REPLICAS", "SUBMITTED", "PARENT", "MESSAGE"]
    assert row.split()[:3] == [job_id, "running", "2"]
    code, out = run("list", "--json")
    assert [j["job_id"] for j in json.loads(out)] == [job_id]

    code, out = run("status", job_id)
    assert code == 0
    assert f"job        {job_id}" in out and "state      running" in out and "labels     team=rl" in out
    assert out.splitlines()[-2].split() == ["0", "running", "1", "-"]
    code, out = run("status", job_id, "--json")
    data = json.loads(out)
    assert data["state"] == "running" and [r["rank"] for r in data["replicas"]] == [0, 1]


def test_cancel_asks_first_then_records_the_reason(backend: LocalBackend) -> None:
    job_id = backend.submit(JobSpec(name="victim", argv=SLEEP))
    code, out = run("cancel", job_id, input="n\n")
    assert code == 1 and "Cancel " + job_id in out
    assert not backend.status(job_id).state.terminal

    code, out = run("cancel", job_id, "--reason", "wrong config", input="y\n")
    assert code == 0 and f"{job_id}: cancelled" in out and "wrong config" in out
    assert backend.status(job_id).state == JobState.CANCELLED
    code, out = run("cancel", job_id, "--yes")
    assert code == 0 and "already ended: cancelled" in out


def test_cancel_from_another_shell(backend: LocalBackend, root: Path) -> None:
    job_id = backend.submit(JobSpec(name="remote", argv=SLEEP))
    done = subprocess.run(
        [sys.executable, "-m", "rlaunch", "jobs", "cancel", "--yes", job_id],
        env=env_with_root(root), capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert backend.status(job_id).state == JobState.CANCELLED


def test_unknown_ids_and_options_are_clear_errors(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for command in (["status", "nope"], ["logs", "nope"], ["cancel", "--yes", "nope"]):
        code, out = run(*command)
        assert code == 2 and "no local job 'nope'" in out and "rlaunch jobs list" in out
    code, out = run("--backend", "nonesuch", "list")
    assert code == 2 and "unknown cluster backend 'nonesuch'" in out

    elsewhere = LocalBackend(tmp_path / "other-root")
    monkeypatch.delenv("RLAUNCH_LOCAL_ROOT")
    job_id = elsewhere.submit(JobSpec(name="elsewhere", argv=py("pass")))
    elsewhere.wait(job_id, timeout=20)
    code, out = run("--root", str(tmp_path / "other-root"), "list")
    assert code == 0 and job_id in out
