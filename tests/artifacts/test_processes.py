"""Real processes: two runners of one step build it once; a killed runner is recovered from."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

from rlaunch import storage
from rlaunch.artifacts import records

SCRIPT = pathlib.Path(__file__).with_name("_proc_build.py")


def _start(prefix: str, counter: pathlib.Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(SCRIPT), str(counter)],
        env={**os.environ, "RLAUNCH_PREFIX": prefix, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen) -> tuple[int, list[str], str]:
    out, err = proc.communicate(timeout=60)
    actions = json.loads(out.strip().splitlines()[-1]) if out.strip() else []
    return proc.returncode, actions, err


def _wait_for(path: pathlib.Path, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_two_concurrent_runners_build_a_step_once(tmp_path, prefix):
    counter = tmp_path / "counter.txt"
    procs = [_start(prefix, counter, PROC_SLEEP="1.0") for _ in range(2)]
    results = [_finish(p) for p in procs]
    assert [rc for rc, _, _ in results] == [0, 0], [err for _, _, err in results]
    assert len(counter.read_text().splitlines()) == 1
    assert sorted(actions[0] for _, actions, _ in results) == ["built", "served"]
    output = f"{prefix}/shared/slow/2026.11.30"
    assert records.is_succeeded(output)
    assert not storage.exists(storage.join(output, ".lock.json"))


def test_a_runner_waits_for_the_one_holding_the_lock(tmp_path, prefix):
    counter, started, release = tmp_path / "counter.txt", tmp_path / "started", tmp_path / "release"
    first = _start(prefix, counter, PROC_STARTED=str(started), PROC_RELEASE=str(release))
    try:
        _wait_for(started)
        second = _start(prefix, counter, PROC_SLEEP="0")  # plans "run", finds the lock, waits
        waiting = second.stderr.readline()  # its first report line
        assert "waiting for shared/slow@2026.11.30" in waiting
        assert first.poll() is None and len(counter.read_text().splitlines()) == 1
    finally:
        release.touch()
    rc1, actions1, _ = _finish(first)
    rc2, actions2, err2 = _finish(second)
    assert (rc1, actions1) == (0, ["built"])
    assert (rc2, actions2) == (0, ["served"]), err2
    assert len(counter.read_text().splitlines()) == 1


def test_a_runner_killed_mid_step_leaves_no_record_and_a_rerun_completes(tmp_path, prefix):
    counter, started = tmp_path / "counter.txt", tmp_path / "started"
    output = pathlib.Path(prefix) / "shared" / "slow" / "2026.11.30"
    victim = _start(prefix, counter, PROC_SLEEP="60", PROC_STARTED=str(started))
    _wait_for(started)
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=30)
    assert victim.returncode == -signal.SIGKILL

    assert not (output / ".artifact.json").exists()
    assert records.read_status(str(output))["state"] == "running"
    assert not records.is_succeeded(str(output))
    assert (output / ".lock.json").exists()  # left behind by the dead runner
    for leftover in output.iterdir():  # anything present is complete JSON or the step's own files
        if leftover.name.endswith(".json"):
            json.loads(leftover.read_text())

    rc, actions, err = _finish(_start(prefix, counter, PROC_SLEEP="0", RLAUNCH_LOCK_STALE_SECONDS="1"))
    assert (rc, actions) == (0, ["built"]), err
    assert len(counter.read_text().splitlines()) == 2
    record = records.read_record(str(output))
    assert record["name"] == "shared/slow" and record["version"] == "2026.11.30"
    assert records.read_status(str(output))["state"] == "succeeded"
    assert not (output / ".lock.json").exists()
    assert (output / "result.txt").read_text() == "done"
