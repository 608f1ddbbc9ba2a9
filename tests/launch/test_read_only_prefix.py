"""Read-only views on a read-only prefix (a shared bucket mounted for readers).

A run whose every process was killed with SIGKILL leaves a record that says "running". On a
prefix this user cannot write, `rlaunch status`, `runs`, `logs` and `verify-smoke` must still tell
the truth (the run failed: its jobs are gone), reconciling in memory, and write nothing.

The prefix is made read-only for real: bind-mounted read-only over itself (we are root, so a
chmod would not stop a write). Where mounting is not permitted the test says so and skips.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.launch.test_kill9 import RUN, Run
from tests.support.launchers import Launcher

pytestmark = pytest.mark.launch


def _mount(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mount", *args], capture_output=True, text=True, check=False)


@pytest.fixture
def read_only(launcher: Launcher) -> Iterator[Path]:
    """Makes the launcher's prefix read-only (call the returned function once the run is dead)."""
    mounted: list[Path] = []

    def make_read_only() -> None:
        prefix = launcher.prefix
        bound = _mount("--bind", str(prefix), str(prefix))
        if bound.returncode != 0:
            pytest.skip(f"cannot bind-mount here (mount needs root and CAP_SYS_ADMIN): {bound.stderr.strip()}")
        mounted.append(prefix)
        remounted = _mount("-o", "remount,ro,bind", str(prefix))
        assert remounted.returncode == 0, remounted.stderr
        probe = prefix / "probe"
        with pytest.raises(OSError):
            probe.write_text("x")

    yield make_read_only  # type: ignore[misc]
    for path in mounted:
        subprocess.run(["umount", str(path)], check=True)


def test_a_dead_run_on_a_read_only_prefix_is_reported_failed_and_nothing_is_written(
    launcher: Launcher, read_only
) -> None:  # noqa: ANN001
    run = Run(launcher, "training", "everything")
    for pid in [run.front.pid, *run.victims]:  # nothing is left to record an outcome
        os.kill(pid, signal.SIGKILL)
    run.front.wait(30)
    record_before = json.dumps(run.record(), sort_keys=True)
    assert run.record()["attempts"][-1]["state"] == "running"
    read_only()

    shown = launcher.run("-m", "rlaunch", "status", RUN, "--json", timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "Traceback" not in shown.stderr
    status = json.loads(shown.stdout)
    assert status["state"] == "failed" and status["is_terminal"], status
    assert "supervisor" in (status["failure"] or status["state_reason"] or ""), status
    failure_class = status["failure_class"]  # a lost supervisor is the machinery's fault: retry
    assert (failure_class["kind"], failure_class["cause"]) == ("operational", "lost supervisor"), failure_class
    assert failure_class["where"] == socket.gethostname() and "--retry" in failure_class["advice"], failure_class

    listed = launcher.run("-m", "rlaunch", "runs", "--json", timeout=60)
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert row["state"] == "failed", row

    text = launcher.run("-m", "rlaunch", "status", RUN, timeout=60)
    assert text.returncode == 0 and "failed" in text.stdout, text.stdout + text.stderr

    verdict = launcher.run("-m", "rlaunch", "verify-smoke", RUN, timeout=60)
    assert verdict.returncode == 1, verdict.stdout + verdict.stderr  # criteria fail: the run did not succeed
    assert "Traceback" not in verdict.stderr

    logs = launcher.run("-m", "rlaunch", "logs", RUN, "--coordinator", timeout=60)
    assert logs.returncode == 0, logs.stderr
    assert "Traceback" not in logs.stderr

    assert json.dumps(run.record(), sort_keys=True) == record_before  # nothing was written
