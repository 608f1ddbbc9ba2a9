"""Damaged state files name themselves and their fix; listings report them and go on; the run
record is updated under a lock; an attempt whose processes were all killed is finalised."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from rlaunch.artifacts import records
from rlaunch.cli.admin import main as rlaunch_main
from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.cluster.protocol import JobSpec
from rlaunch.control.finalise import finalise_open_attempts
from rlaunch.runs import run_record
from rlaunch.runs.layout import latest_checkpoint
from rlaunch.statefiles import CorruptStateError

from .helpers import job_file, pid_alive, py, read_pids, wait_for

VERSION = "2026.11.30"


def rlaunch(*args: str, env: dict[str, str]) -> tuple[int, str]:
    result = CliRunner().invoke(rlaunch_main, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.output


def a_run(prefix: Path, attempts: list[dict], *, terminal: bool = False) -> Path:
    """An RL artifact directory as the host leaves it: run record, status, maybe a terminal manifest."""
    out = prefix / "demo" / "rl" / VERSION
    out.mkdir(parents=True)
    (out / "run_record.json").write_text(json.dumps({"run_id": "demo/rl", "attempts": attempts}))
    records.write_status(str(out), records.SUCCEEDED if terminal else records.RUNNING, identity=f"demo/rl@{VERSION}")
    if terminal:
        result = {"state": "succeeded", "attempt_id": attempts[-1]["attempt_id"]}
        (out / "terminal.json").write_text(json.dumps({"config": {}, "result": result}))
    return out


def test_a_non_integer_latest_marker_names_the_file_and_the_fix(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    (root / "global_step_2").mkdir(parents=True)
    (root / "latest").write_text("2\n")
    assert latest_checkpoint(str(root)).step == 2
    (root / "latest").write_text("global_step_2 (half written?)\n")
    with pytest.raises(CorruptStateError) as caught:
        latest_checkpoint(str(root))
    message = str(caught.value)
    assert str(root / "latest") in message and "not a step number" in message
    assert "write the step of the newest complete checkpoint" in message


def test_a_damaged_run_record_is_never_pending_and_the_next_write_keeps_it_aside(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    out = a_run(prefix, [{"attempt_id": "a1", "state": "succeeded", "artifact": f"demo/rl@{VERSION}"}], terminal=True)
    (out / "run_record.json").write_text('{"run_id": "demo/rl", "attempts": [')  # cut short
    env = {"RLAUNCH_PREFIX": str(prefix), "RLAUNCH_LOCAL_ROOT": str(prefix / ".jobs")}
    code, output = rlaunch("status", f"demo/rl@{VERSION}", env=env)
    assert code == 1, output
    assert "pending" not in output and str(out / "run_record.json") in output and "move it aside" in output
    assert "terminal     succeeded  attempt a1" in output  # what the terminal manifest still says

    code, output = rlaunch("runs", env=env)
    assert code == 1 and str(out / "run_record.json") in output  # reported, and the listing went on
    assert f"demo/rl@{VERSION}" in output and "damaged" in output

    run_record.update_attempt(str(out), "demo/rl", "a2", {"state": "launching"})
    kept = list(out.glob("run_record.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text().endswith("[")
    record = json.loads((out / "run_record.json").read_text())
    assert [a["attempt_id"] for a in record["attempts"]] == ["a2"]
    assert record["replaced_damaged_record"] == str(kept[0])


def test_a_damaged_record_that_nothing_else_explains_is_damaged_not_pending(tmp_path: Path) -> None:
    prefix = tmp_path / "prefix"
    out = a_run(prefix, [{"attempt_id": "a1", "state": "running", "artifact": f"demo/rl@{VERSION}"}])
    (out / "run_record.json").write_text("")
    code, output = rlaunch("status", f"demo/rl@{VERSION}", env={"RLAUNCH_PREFIX": str(prefix)})
    assert code == 1 and "empty file" in output
    assert "state        damaged  (no other state of the run names an attempt)" in output and "pending" not in output


def test_a_damaged_step_status_names_its_file(tmp_path: Path) -> None:
    out = tmp_path / "prefix" / "demo" / "data" / VERSION
    out.mkdir(parents=True)
    (out / ".status.json").write_bytes(b"\x00\x01garbage")
    with pytest.raises(CorruptStateError, match=r"\.status\.json is damaged .* so the next --run rebuilds the step"):
        records.is_succeeded(str(out))


def test_jobs_list_reports_a_damaged_job_and_lists_the_rest(backend: LocalBackend, root: Path) -> None:
    jobs = [backend.submit(JobSpec(name=f"job{i}", argv=py("print('hi')"))) for i in range(3)]
    for job_id in jobs:
        backend.wait(job_id, timeout=30)
    saved = {path: path.read_bytes() for path in (root / jobs[0] / "state.json", root / jobs[1] / "job.json")}
    (root / jobs[0] / "state.json").write_text("{")
    (root / jobs[1] / "job.json").write_text("[]")
    code, output = rlaunch("jobs", "list", env={"RLAUNCH_LOCAL_ROOT": str(root)})
    assert code == 1, output
    assert jobs[2] in output and "succeeded" in output
    assert f"{root / jobs[0] / 'state.json'} is damaged" in output
    assert f"{root / jobs[1] / 'job.json'} is damaged" in output and "remove its directory" in output
    code, output = rlaunch("jobs", "status", jobs[0], env={"RLAUNCH_LOCAL_ROOT": str(root)})
    assert code == 2 and "state.json is damaged" in output and "Traceback" not in output
    for path, data in saved.items():  # whole again for the fixture's teardown
        path.write_bytes(data)


def _append_attempts(output_path: str, worker: int, count: int) -> None:
    for i in range(count):
        run_record.update_attempt(output_path, "demo/rl", f"w{worker}-{i}", {"state": "launching"})


def test_concurrent_run_record_updates_lose_nothing(tmp_path: Path) -> None:
    out = str(tmp_path / "demo" / "rl" / VERSION)
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_append_attempts, args=(out, w, 25)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    attempts = json.loads(Path(out, "run_record.json").read_text())["attempts"]
    assert sorted(a["attempt_id"] for a in attempts) == sorted(f"w{w}-{i}" for w in range(4) for i in range(25))


def test_a_run_whose_supervisors_were_killed_is_finalised_by_status(
    backend: LocalBackend, root: Path, tmp_path: Path
) -> None:
    """SIGKILL to the coordinator's supervisor and its processes: the record said "running" forever."""
    pidfile = tmp_path / "pid"
    script = f"import os, time\nopen({str(pidfile)!r}, 'w').write(f'{{os.getpid()}}\\n')\ntime.sleep(120)"
    coordinator = backend.submit(JobSpec(name="coordinator", argv=py(script)))
    pids = wait_for(lambda: read_pids(pidfile))
    prefix = tmp_path / "prefix"
    attempt = {
        "attempt_id": "a1",
        "state": "running",
        "artifact": f"demo/rl@{VERSION}",
        "backend": "local",
        "placement": {"root": str(root)},
        "coordinator_job_id": coordinator,
    }
    out = a_run(prefix, [attempt])
    supervisor = job_file(root, coordinator, "supervisor.json")["pid"]
    for pid in (supervisor, *pids):
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not any(pid_alive(p) for p in (supervisor, *pids)), what="the run's processes to die")
    assert run_record.read(str(out))["attempts"][0]["state"] == "running"

    env = {"RLAUNCH_PREFIX": str(prefix), "RLAUNCH_LOCAL_ROOT": str(root)}
    code, output = rlaunch("status", f"demo/rl@{VERSION}", "--json", env=env)
    assert code == 0, output
    shown = json.loads(output)
    assert shown["state"] == "failed" and "supervisor lost" in shown["failure"]
    entry = run_record.read(str(out))["attempts"][0]
    assert entry["state"] == "failed" and "supervisor lost" in entry["failure"]
    assert entry["finalised_by"].startswith("rlaunch status")
    assert finalise_open_attempts(str(out), str(prefix), by="launch") == []  # already final: untouched


def test_the_next_launch_finalises_an_attempt_left_open(backend: LocalBackend, root: Path, tmp_path: Path) -> None:
    coordinator = backend.submit(JobSpec(name="coordinator", argv=py("import sys; sys.exit(3)")))
    backend.wait(coordinator, timeout=30)
    attempt = {"attempt_id": "a1", "state": "running", "backend": "local", "coordinator_job_id": coordinator}
    out = a_run(tmp_path / "prefix", [attempt, {"attempt_id": "a2", "state": "succeeded"}])
    assert finalise_open_attempts(str(out), None, by="launch of attempt a3") == ["a1"]
    first, second = run_record.read(str(out))["attempts"]
    assert first["state"] == "failed" and "coordinator failed" in first["failure"]
    assert second == {"attempt_id": "a2", "state": "succeeded"}
