"""Retries, timeouts, cancel, a lost supervisor, and state that outlives the submitter."""

from __future__ import annotations

import getpass
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.cluster.protocol import JobSpec, JobState

from .helpers import all_gone, env_with_root, job_file, pid_alive, py, read_pids, wait_for

# A replica that records its pid (and, optionally, a grandchild's) and then waits to be stopped.
SLEEPER = """
import os, subprocess, sys, time
pids = [os.getpid()]
if {grandchild}:
    pids.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]).pid)
if {ignore_term}:
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open({pidfile!r} + os.environ["RLAUNCH_REPLICA_RANK"], "w") as f:
    f.write("\\n".join(map(str, pids)) + "\\n")
print("ready", flush=True)
time.sleep(60)
"""


def sleeper(pidfile: Path, *, grandchild: bool = False, ignore_term: bool = False) -> tuple[str, ...]:
    return py(SLEEPER.format(pidfile=str(pidfile), grandchild=grandchild, ignore_term=ignore_term))


def test_failed_replica_is_retried_with_its_own_log(backend: LocalBackend, tmp_path: Path) -> None:
    marker = tmp_path / "failed-once"
    code = f"""
        import pathlib, sys
        marker = pathlib.Path({str(marker)!r})
        if not marker.exists():
            marker.touch()
            print("first attempt fails")
            sys.exit(1)
        print("second attempt works")
    """
    job_id = backend.submit(JobSpec(name="retry", argv=py(code), max_retries=1))
    status = backend.wait(job_id, timeout=20)
    assert status.state == JobState.SUCCEEDED
    assert status.replicas[0].attempts == 2 and status.replicas[0].exit_code == 0
    assert job_file(backend.root, job_id, "state.json")["replicas"][0]["exit_codes"] == [1, 0]
    logs = backend.root / job_id / "logs"
    assert (logs / "rank-0.attempt-1.log").read_text() == "first attempt fails\n"
    assert (logs / "rank-0.attempt-2.log").read_text() == "second attempt works\n"
    assert list(backend.logs(job_id, replica=0)) == ["first attempt fails", "second attempt works"]


def test_replica_that_exhausts_retries_fails_the_job_and_stops_the_others(
    backend: LocalBackend, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    code = f"""
        import os, runpy, sys
        if os.environ["RLAUNCH_REPLICA_RANK"] == "0":
            print("boom")
            sys.exit(3)
        exec({SLEEPER.format(pidfile=str(pidfile), grandchild=False, ignore_term=False)!r})
    """
    job_id = backend.submit(JobSpec(name="exhaust", argv=py(code), replicas=2, max_retries=1))
    status = backend.wait(job_id, timeout=20)
    assert status.state == JobState.FAILED
    assert "replica 0 failed: exit code 3 on attempt 2 of 2" in (status.message or "")
    assert status.replicas[0].attempts == 2 and status.replicas[0].exit_code == 3
    assert status.replicas[1].state == JobState.CANCELLED
    assert list(backend.logs(job_id, replica=0)) == ["boom", "boom"]
    stopped = [line for line in backend.logs(job_id, replica=1) if line.startswith("[rlaunch.local]")]
    assert stopped == [f"[rlaunch.local] stopping this replica: {status.message}"]  # why it ended, in its own log
    assert all_gone(read_pids(Path(f"{pidfile}1")))


def test_timeout_kills_the_whole_process_group(backend: LocalBackend, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    job_id = backend.submit(JobSpec(name="slow", argv=sleeper(pidfile, grandchild=True), timeout_seconds=1.0))
    pids = wait_for(lambda: read_pids(Path(f"{pidfile}0")), what="replica and grandchild pids")
    assert len(pids) == 2 and all(pid_alive(p) for p in pids)
    status = backend.wait(job_id, timeout=20)
    assert status.state == JobState.FAILED
    assert "timed out after 1s" in (status.message or "")
    assert status.replicas[0].state == JobState.FAILED
    assert all_gone(pids)


def test_cancel_records_who_and_why_and_escalates_to_sigkill(backend: LocalBackend, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    job_id = backend.submit(JobSpec(name="stubborn", argv=sleeper(pidfile, ignore_term=True)))
    pids = wait_for(lambda: read_pids(Path(f"{pidfile}0")))
    started = time.monotonic()
    status = backend.cancel(job_id, reason="testing cancel")
    assert time.monotonic() - started >= 1.0  # SIGTERM was ignored; SIGKILL came after the grace
    assert status.state == JobState.CANCELLED
    assert status.replicas[0].state == JobState.CANCELLED
    assert all_gone(pids)
    who = f"{getpass.getuser()}@{socket.gethostname()} (pid {os.getpid()})"
    assert status.message and who in status.message and status.message.endswith(": testing cancel")
    record = job_file(backend.root, job_id, "cancel.json")
    assert record["reason"] == "testing cancel" and record["pid"] == os.getpid() and record["at"]
    # idempotent: cancelling again changes nothing
    assert backend.cancel(job_id, reason="again") == status


def test_cancel_of_a_finished_job_is_a_no_op(backend: LocalBackend) -> None:
    job_id = backend.submit(JobSpec(name="quick", argv=py("pass")))
    done = backend.wait(job_id, timeout=20)
    assert backend.cancel(job_id) == done and done.state == JobState.SUCCEEDED
    assert not (backend.root / job_id / "cancel.json").exists()


def test_wait_returns_the_current_status_when_it_times_out(backend: LocalBackend, tmp_path: Path) -> None:
    job_id = backend.submit(JobSpec(name="long", argv=sleeper(tmp_path / "pid")))
    started = time.monotonic()
    status = backend.wait(job_id, timeout=0.3)
    assert status.state in (JobState.PENDING, JobState.RUNNING)
    assert time.monotonic() - started < 2


def test_a_killed_supervisor_is_reported_lost_and_its_replicas_stopped(backend: LocalBackend, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    job_id = backend.submit(JobSpec(name="orphan", argv=sleeper(pidfile, grandchild=True)))
    pids = wait_for(lambda: read_pids(Path(f"{pidfile}0")))
    supervisor = job_file(backend.root, job_id, "supervisor.json")["pid"]
    os.kill(supervisor, signal.SIGKILL)
    wait_for(lambda: not pid_alive(supervisor), what="supervisor to die")

    status = backend.status(job_id)
    assert status.state == JobState.FAILED
    assert (status.message or "").startswith("supervisor lost")
    assert status.replicas[0].state == JobState.FAILED
    assert all_gone(pids)
    assert backend.status(job_id) == status  # recorded, not recomputed differently


def test_job_state_outlives_the_submitting_process(backend: LocalBackend, root: Path, tmp_path: Path) -> None:
    release = tmp_path / "release"
    replica = f"import os, time\nwhile not os.path.exists({str(release)!r}): time.sleep(0.02)\nprint('still here')"
    submitter = f"""
        import sys
        from rlaunch.cluster.local.backend import LocalBackend
        from rlaunch.cluster.protocol import JobSpec
        print(LocalBackend().submit(JobSpec(name="detached", argv=[sys.executable, "-c", {replica!r}])))
    """
    done = subprocess.run(
        py(submitter), env=env_with_root(root), capture_output=True, text=True, timeout=30, check=True
    )
    job_id = done.stdout.strip()
    # The submitter has exited; the job is still going and another process can see it.
    assert backend.status(job_id).state in (JobState.PENDING, JobState.RUNNING)
    release.touch()
    status = backend.wait(job_id, timeout=20)
    assert status.state == JobState.SUCCEEDED
    assert list(backend.logs(job_id)) == ["[rank 0] still here"]
    assert job_file(root, job_id, "job.json")["submitted_by"]["pid"] != os.getpid()


def test_argv_that_cannot_be_executed_fails_with_a_clear_log(backend: LocalBackend, tmp_path: Path) -> None:
    script = tmp_path / "script"
    script.write_text("#!/no/such/interpreter\n")
    script.chmod(0o755)
    job_id = backend.submit(JobSpec(name="unstartable", argv=(str(script),), max_retries=1))
    status = backend.wait(job_id, timeout=20)
    assert status.state == JobState.FAILED
    assert status.replicas[0].attempts == 2 and status.replicas[0].exit_code == 127
    lines = list(backend.logs(job_id))
    assert len(lines) == 2 and all(
        line.startswith(f"[rank 0] [rlaunch] could not start {str(script)!r}") for line in lines
    )
