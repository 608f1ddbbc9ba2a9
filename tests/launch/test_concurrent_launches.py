"""Two `--run`s of the same version started at once: one builds, the other waits for it (the build
lock beside the output, `artifacts.lock.StepLock`) and serves what it built; one child job trains,
and the run record loses nothing: one attempt, recorded once, in JSON that parses, as does every
other record the two left.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.launchers import REPO, Launcher

pytestmark = pytest.mark.launch

VERSION = "2026.12.06"
RL = f"marker/rl@{VERSION}"
MARKER = ("-m", "tests.experiments.marker", "--version", VERSION, "--steps", "4", "--run")


def test_two_runs_of_one_version_at_once_build_it_once_and_record_it_once(launcher: Launcher) -> None:
    runs = [
        subprocess.Popen(
            [sys.executable, *MARKER], cwd=REPO, env=launcher.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=300)[0].decode(errors="replace") for run in runs]
    assert [run.returncode for run in runs] == [0, 0], "\n=====\n".join(o[-3000:] for o in outputs)
    built = [o for o in outputs if f"  built {RL}" in o]
    served = [o for o in outputs if f"  served from storage {RL}" in o]
    assert len(built) == 1 and len(served) == 1, "\n=====\n".join(outputs)  # one builds, the other serves it
    assert "Traceback" not in "".join(outputs)

    out = launcher.prefix / "marker" / "rl" / VERSION
    attempts = json.loads((out / "run_record.json").read_text())["attempts"]
    assert len(attempts) == 1 and attempts[0]["state"] == "succeeded", attempts
    assert attempts[0]["child_job_id"] in built[0] and attempts[0]["coordinator_job_id"] in built[0], attempts
    children = [j for j in launcher.backend().list_jobs() if "coordinator" not in j.job_id]
    assert [j.job_id for j in children] == [attempts[0]["child_job_id"]]  # one child trained
    assert not (out / ".lock.json").exists()  # released
    for record in launcher.prefix.rglob("*.json"):  # nothing half-written by the two at once
        json.loads(record.read_text())
