"""Logs: interleaved with rank prefixes, one replica, the tail, and following a running job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.cluster.protocol import JobNotFoundError, JobSpec, JobState

from .helpers import env_with_root, py

THREE_LINES = """
import os
rank = os.environ["RLAUNCH_REPLICA_RANK"]
for i in range(3):
    print(f"line {i} from {rank}")
"""

# Prints, then holds until the test has seen output stream (so "while running" is not a race), then ends.
TICKS = """
import os, sys, time
for i in range(4):
    print(f"tick {{i}}")
    time.sleep(0.05)
while not os.path.exists({release!r}):
    time.sleep(0.02)
sys.stdout.write("no newline at the end")
"""


def cli(root: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`python -m rlaunch jobs ...` in a separate process, as another shell would run it."""
    return subprocess.run(
        [sys.executable, "-m", "rlaunch", "jobs", *args],
        env=env_with_root(root),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_logs_read_from_another_process(backend: LocalBackend, root: Path) -> None:
    job_id = backend.submit(JobSpec(name="talk", argv=py(THREE_LINES), replicas=2))
    assert backend.wait(job_id, timeout=20).state == JobState.SUCCEEDED

    everything = cli(root, "logs", job_id)
    assert everything.returncode == 0, everything.stderr
    lines = everything.stdout.splitlines()
    assert sorted(lines) == sorted(f"[rank {r}] line {i} from {r}" for r in (0, 1) for i in range(3))
    assert [line for line in lines if line.startswith("[rank 1]")] == [f"[rank 1] line {i} from 1" for i in range(3)]

    one = cli(root, "logs", job_id, "--replica", "1", "--tail", "2")
    assert one.stdout.splitlines() == ["line 1 from 1", "line 2 from 1"]
    assert list(backend.logs(job_id, tail=1)) == lines[-1:]


def test_follow_streams_until_the_job_ends_and_drains_everything(
    backend: LocalBackend, root: Path, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    job_id = backend.submit(JobSpec(name="ticks", argv=py(TICKS.format(release=str(release)))))
    follower = subprocess.Popen(
        [sys.executable, "-m", "rlaunch", "jobs", "logs", "--follow", job_id],
        env=env_with_root(root),
        stdout=subprocess.PIPE,
        bufsize=0,  # unbuffered: communicate() must see everything readline() did not consume
    )
    try:
        assert follower.stdout is not None
        first = follower.stdout.readline().decode()
        assert first == "[rank 0] tick 0\n"
        assert backend.status(job_id).state == JobState.RUNNING  # it streams while the job runs
        release.touch()
        rest = follower.communicate(timeout=30)[0].decode()
    finally:
        follower.kill()
        follower.wait()
    assert follower.returncode == 0
    assert (first + rest).splitlines() == [f"[rank 0] tick {i}" for i in range(4)] + ["[rank 0] no newline at the end"]
    assert backend.status(job_id).state == JobState.SUCCEEDED
    assert list(backend.logs(job_id, follow=True, tail=2)) == ["[rank 0] tick 3", "[rank 0] no newline at the end"]


def test_log_errors_are_clear(backend: LocalBackend, root: Path) -> None:
    job_id = backend.submit(JobSpec(name="one", argv=py("print('x')")))
    with pytest.raises(ValueError, match=r"replicas 0\.\.0; there is no replica 3"):
        backend.logs(job_id, replica=3)
    with pytest.raises(JobNotFoundError, match="no local job 'missing-job'"):
        backend.logs("missing-job")
    with pytest.raises(JobNotFoundError):
        backend.status("../" + job_id)
    result = cli(root, "logs", "missing-job")
    assert result.returncode == 2 and "no local job 'missing-job'" in result.stderr
    backend.wait(job_id, timeout=20)
