"""Interrupts behave: SIGINT or SIGTERM to the `--run` submitter, `rlaunch status --watch` and
`rlaunch logs --follow` is acted on within a second.

"Within a second" is measured against the machine as it is: the same signal goes at the same
moment to a yardstick process of rlaunch's size (it imports what these commands import, then exits
on the signal), and rlaunch may take at most a second longer than it did. On an idle machine the
yardstick takes a few tens of milliseconds; on a loaded CI machine it takes what the load costs a
process that size to wake and tear down, which is no fault of rlaunch's. (A bare interpreter was
the first yardstick: it tears down nothing, so on two cores shared with other suites it answered in
0.01 s while a process holding rlaunch's modules needed more than a second to exit.)

The submitter stops following and says what keeps running remotely (its coordinator) and how to
follow or cancel it; the watchers stop. None prints a traceback, and the run goes on untouched:
an interrupt of a view is never a cancel.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.launchers import REPO, Launcher
from tests.support.polling import wait_for

pytestmark = pytest.mark.launch

VERSION = "2026.12.05"
RUN = f"marker/rl@{VERSION}"
MARKER = ("-m", "tests.experiments.marker", "--version", VERSION, "--scenario", "slow", "--steps", "200")
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
ACTED_ON_WITHIN_S = 1.0  # beyond the yardstick; measured: 0.03-0.21 s, also with six busy loops on 2 cores
YARDSTICK = """
import signal, sys, time
import fsspec, yaml
import rlaunch.cluster.local.backend, rlaunch.control.cli, rlaunch.observe.cli, tests.experiments.marker
signal.signal(signal.SIGINT, lambda signum, frame: sys.exit(128 + signum))
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
print("ready", flush=True)
while True:
    time.sleep(0.05)
"""


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _start(launcher: Launcher, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """Started with SIGINT ignored, as a script's background job is: Python then installs no Ctrl-C
    handler of its own, and only rlaunch's own makes the command stop on it."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, *args], cwd=REPO, env=launcher.env, stdout=out, stderr=out, preexec_fn=_ignore_sigint
        )


def _interrupt(process: subprocess.Popen[bytes], log: Path, sig: signal.Signals, ready: str) -> str:
    yardstick = subprocess.Popen([sys.executable, "-c", YARDSTICK], cwd=REPO, stdout=subprocess.PIPE)
    assert yardstick.stdout is not None and yardstick.stdout.readline() == b"ready\n"
    wait_for(lambda: ready in log.read_text(errors="replace"), 120, f"{ready!r} in {log.name}")
    process.send_signal(sig)
    yardstick.send_signal(sig)
    sent = time.monotonic()
    assert yardstick.wait(120) == EXIT[sig]
    load = time.monotonic() - sent  # what acting on a signal costs a process this size on this machine now
    try:
        process.wait(max(0.0, sent + load + ACTED_ON_WITHIN_S - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(
            f"{sig.name} was not acted on within {ACTED_ON_WITHIN_S}s of the yardstick ({load:.2f}s):\n"
            f"{log.read_text()[-2000:]}"
        )
    output = log.read_text(errors="replace")
    assert process.returncode == EXIT[sig], (process.returncode, time.monotonic() - sent, output[-2000:])
    assert "Traceback" not in output, output[-3000:]
    return output


def _coordinator(launcher: Launcher) -> str:
    path = launcher.prefix / "marker" / "rl" / VERSION / "run_record.json"

    def recorded() -> str | None:
        attempts = (json.loads(path.read_text()) if path.exists() else {}).get("attempts") or [{}]
        return attempts[-1].get("coordinator_job_id")

    return wait_for(recorded, 60, "the coordinator's job id in the run record")


def _still_running(launcher: Launcher, job_id: str) -> bool:
    return not launcher.backend().status(job_id).state.terminal


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_the_submitter_stops_following_and_says_what_runs_on_and_how_to_reach_it(
    launcher: Launcher, tmp_path: Path, sig: signal.Signals
) -> None:
    front = _start(launcher, tmp_path / "front.log", *MARKER, "--run")
    output = _interrupt(front, tmp_path / "front.log", sig, "running test-marker entrypoint")
    coordinator = _coordinator(launcher)
    last = output.strip().splitlines()[-1]
    assert coordinator in last and "keeps running" in last, last
    assert f"rlaunch jobs logs {coordinator} --follow" in last and f"rlaunch jobs cancel {coordinator}" in last, last
    assert _still_running(launcher, coordinator), "an interrupt of the submitter cancelled its coordinator"


def test_status_watch_and_logs_follow_stop_on_either_signal(launcher: Launcher, tmp_path: Path) -> None:
    detached = launcher.run(*MARKER, "--run", "--detach", timeout=120)
    assert detached.returncode == 0, detached.stdout[-2000:] + detached.stderr[-2000:]
    coordinator = _coordinator(launcher)
    views = {
        "watch": (("-m", "rlaunch", "status", RUN, "--watch", "--interval", "0.5"), "refreshing every"),
        "follow": (("-m", "rlaunch", "logs", RUN, "--coordinator", "--follow"), "submitted child job"),
    }
    for name, (argv, ready) in views.items():
        for sig in EXIT:
            log = tmp_path / f"{name}-{sig.name}.log"
            _interrupt(_start(launcher, log, *argv), log, sig, ready)
    assert _still_running(launcher, coordinator), "an interrupt of a view cancelled the run"
