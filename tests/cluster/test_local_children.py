"""Child jobs: submitted from inside a job, listed by the parent, never outliving it."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.cluster.protocol import JobNotFoundError, JobSpec, JobState, Resources

from .helpers import all_gone, py, read_pids, wait_for

# Runs inside the parent job: rebuild the backend from the environment and submit a child.
PARENT = """
import os, sys, time
from rlaunch.cluster.protocol import JobSpec, Resources, backend_from_env
backend = backend_from_env()
print("root", backend.root)
child = backend.submit_child(JobSpec(name="child", argv={child_argv!r}, resources=Resources(cpu=1)))
print("child", child, flush=True)
{then}
"""

CHILD_SLEEPS = """
import os, time
with open({pidfile!r}, "w") as f:
    f.write(f"{{os.getpid()}}\\n")
time.sleep(60)
"""


def parent_argv(child_argv: tuple[str, ...], then: str) -> tuple[str, ...]:
    return py(PARENT.format(child_argv=child_argv, then=then))


def child_of(backend: LocalBackend, parent: str) -> str:
    line = wait_for(
        lambda: next((line for line in backend.logs(parent) if line.startswith("[rank 0] child ")), None),
        what="child id",
    )
    return line.split()[-1]


def test_child_job_knows_its_parent_and_is_listed_as_its_child(backend: LocalBackend) -> None:
    child_argv = py("import os; print('my job', os.environ['RLAUNCH_JOB_ID'])")
    then = "print('child ended', backend.wait(child, 20).state.value)"
    parent = backend.submit(JobSpec(name="coordinator", argv=parent_argv(child_argv, then)))
    assert backend.wait(parent, timeout=30).state == JobState.SUCCEEDED

    child = child_of(backend, parent)
    assert child.startswith("child-")
    logs = list(backend.logs(parent))
    assert f"[rank 0] root {backend.root}" in logs  # rebuilt inside the job with the same root
    assert "[rank 0] child ended succeeded" in logs
    assert backend.status(parent).children == (child,)
    assert backend.status(child).parent == parent
    assert list(backend.logs(child)) == [f"[rank 0] my job {child}"]


def test_jobs_are_checked_one_at_a_time_so_a_coordinator_and_child_run_together(root: Path, tmp_path: Path) -> None:
    single_cpu = LocalBackend(root, cpus=1, kill_grace=1.0)
    pidfile = tmp_path / "child.pid"
    parent = single_cpu.submit(JobSpec(
        name="coordinator",
        argv=parent_argv(py(CHILD_SLEEPS.format(pidfile=str(pidfile))), "time.sleep(60)"),
        resources=Resources(cpu=1),
    ))  # fmt: skip
    try:
        child_pid = wait_for(lambda: read_pids(pidfile), what="child to start")
        assert single_cpu.status(parent).state == JobState.RUNNING
        assert single_cpu.status(child_of(single_cpu, parent)).state == JobState.RUNNING
    finally:
        single_cpu.cancel(parent)
    assert all_gone(child_pid)


def test_cancelling_the_parent_cancels_a_running_child(backend: LocalBackend, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    parent = backend.submit(JobSpec(
        name="coordinator",
        argv=parent_argv(py(CHILD_SLEEPS.format(pidfile=str(pidfile))), "time.sleep(60)"),
    ))  # fmt: skip
    child_pids = wait_for(lambda: read_pids(pidfile), what="child to start")
    child = child_of(backend, parent)

    status = backend.cancel(parent, reason="operator stop")
    assert status.state == JobState.CANCELLED
    child_status = backend.status(child)
    assert child_status.state == JobState.CANCELLED
    assert f"parent job {parent} was cancelled: operator stop" in (child_status.message or "")
    assert all_gone(child_pids)


def test_a_child_never_outlives_a_parent_that_finishes(backend: LocalBackend, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    then = f"""
import pathlib
while not pathlib.Path({str(pidfile)!r}).exists():
    time.sleep(0.05)
print("parent done")
"""
    parent = backend.submit(
        JobSpec(name="coordinator", argv=parent_argv(py(CHILD_SLEEPS.format(pidfile=str(pidfile))), then))
    )
    assert backend.wait(parent, timeout=30).state == JobState.SUCCEEDED
    child = child_of(backend, parent)
    child_status = backend.status(child)  # already terminal: the parent waited for it before finishing
    assert child_status.state == JobState.CANCELLED
    assert f"parent job {parent} ended (succeeded)" in (child_status.message or "")
    assert all_gone(read_pids(pidfile))


def test_child_submission_needs_a_live_parent(backend: LocalBackend, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = JobSpec(name="child", argv=py("pass"))
    with pytest.raises(JobNotFoundError, match="parent job"):
        backend.submit(spec, parent="no-such-job")
    finished = backend.submit(spec)
    backend.wait(finished, timeout=20)
    with pytest.raises(ValueError, match="already ended"):
        backend.submit(spec, parent=finished)
    monkeypatch.delenv("RLAUNCH_JOB_ID", raising=False)
    with pytest.raises(RuntimeError, match="inside a running job"):
        backend.submit_child(spec)
