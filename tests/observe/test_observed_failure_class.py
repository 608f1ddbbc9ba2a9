"""A failed attempt the host never classified (the disk under the prefix was full, so its run record
was never finalised) is classified by what the failure message and the exit codes say, and where they
say nothing, by the failed jobs' last log lines: they still name the write that did not fit. Read
through the Backend protocol, from a real local job."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.cluster.protocol import JobSpec
from rlaunch.control.finalise import finalise_snapshot
from rlaunch.launch_config.failures import DISK_FULL, OPERATIONAL, UNCLASSIFIED
from rlaunch.observe.collect import collect, observed_failure_class
from rlaunch.observe.resolve import RunRef
from rlaunch.observe.run_jobs import JobView, ReplicaView
from rlaunch.observe.run_status import RunStatus
from rlaunch.runs import run_record
from tests.support.polling import py

NEVER_FINALISED = "jobs ended (coordinator failed) but the run record was never finalised (running)"
STATUS = "/data/prefix/marker/rl/2026.12.04/.status.json"
FULL = f"[rank 0]   FAILED marker/rl@2026.12.04: OSError: [Errno 28] No space left on device: '{STATUS}'"


def _failed(exit_code: int, log: list[str]) -> RunStatus:
    coordinator = JobView("coordinator", "c1", state="failed", replicas=[ReplicaView(0, "failed", exit_code=exit_code)])
    return RunStatus(
        "marker/rl@2026.12.04", "/out", state="failed", state_reason=NEVER_FINALISED, coordinator=coordinator,
        failed_jobs_log=log,
    )  # fmt: skip


def test_a_failure_nothing_else_classifies_is_classified_by_the_failed_jobs_log() -> None:
    found = observed_failure_class(_failed(1, ["[rank 0] building marker/rl@2026.12.04", FULL, "[rank 0] error: 1"]))
    assert (found.kind, found.cause, found.where, found.evidence) == (OPERATIONAL, DISK_FULL, STATUS, FULL)
    assert observed_failure_class(_failed(1, [])).kind == UNCLASSIFIED  # no log, no evidence


def test_a_full_disk_the_log_names_explains_the_supervisor_it_left_lost() -> None:
    """The child's supervisor could not record its outcome on the full disk: the backend says it was
    lost, the log says why."""
    status = _failed(1, [FULL])
    status.child = JobView(
        "child", "j2", state="failed", message="supervisor lost on vm: it exited without recording an outcome"
    )
    found = observed_failure_class(status)
    assert (found.cause, found.where) == (DISK_FULL, STATUS)


def test_the_message_and_exit_codes_decide_before_a_log_that_names_no_full_disk() -> None:
    unreachable = "[rank 0] requests.exceptions.ConnectionError: Max retries exceeded"
    assert observed_failure_class(_failed(137, [unreachable])).cause == "killed for memory"
    assert observed_failure_class(_failed(1, [unreachable])).cause == "service unreachable"


@pytest.fixture
def backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201 - a LocalBackend, stopped after
    monkeypatch.setenv("RLAUNCH_LOCAL_ROOT", str(tmp_path / "jobs"))
    found = LocalBackend(tmp_path / "jobs", cpus=2, kill_grace=1.0)
    yield found
    for job in found.list_jobs():
        if not job.state.terminal:
            found.cancel(job.job_id, reason="test teardown")


def test_status_classifies_a_never_finalised_attempt_by_its_coordinators_log(
    tmp_path: Path, backend: LocalBackend
) -> None:
    script = (
        f"import sys\nprint('building marker/rl@2026.12.04')\nprint({FULL.removeprefix('[rank 0] ')!r})\nsys.exit(1)"
    )
    job_id = backend.submit(JobSpec(name="coordinator", argv=py(script)))
    assert backend.wait(job_id, timeout=60).state.value == "failed"
    out = str(tmp_path / "out")
    run_record.update_attempt(out, "r1", "a1", {"state": "running", "coordinator_job_id": job_id, "backend": "local"})
    snapshot = collect(RunRef(out, str(tmp_path), "marker/rl@2026.12.04", run_record.read(out)))
    assert (snapshot.state, snapshot.failure_class and snapshot.failure_class.cause) == ("failed", DISK_FULL)
    assert finalise_snapshot(snapshot) is True  # closed; the class still what the log says
    assert snapshot.failure_class is not None and snapshot.failure_class.where == STATUS


DOWN_NODE = "NodeName=node-2 Arch=x86_64 State=DOWN+NOT_RESPONDING ThreadsPerCore=1 Reason=power lost [root@2026-12-05]"


@pytest.mark.parametrize("slurm_state", ["NODE_FAIL", "COMPLETING"])
def test_a_node_set_down_under_the_coordinator_is_its_nodes_failure_not_an_interrupted_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slurm_state: str
) -> None:
    """The host, killed with its node, recorded only that it was interrupted and cancelled its child;
    the coordinator's driver asked Slurm why (`scheduler_failure`) and recorded the node failure."""
    from rlaunch.cluster.slurm import commands
    from rlaunch.cluster.slurm.backend import SlurmBackend

    def slurm(argv: list[str], **_: object) -> str:
        return f"{slurm_state}|NodeDown\n" if argv[0] == "squeue" else DOWN_NODE + "\n"

    monkeypatch.setattr(commands, "run", slurm)
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node-2")
    why = SlurmBackend(root=tmp_path).scheduler_failure("1")
    assert why is not None
    status = RunStatus(
        "marker/rl@2026.12.04", "/out", state="failed", record_state="failed",
        failure="the launch host was interrupted; child job 2 was cancelled",
        coordinator=JobView("coordinator", "1", state="failed", message=f"{why}; supervisor received SIGTERM"),
        child=JobView("child", "2", state="cancelled", message="launch host interrupted"),
    )  # fmt: skip
    found = observed_failure_class(status)
    assert (found.kind, found.cause, found.where) == (OPERATIONAL, "node failure", "node-2")


def test_the_log_read_as_evidence_is_not_part_of_the_status_json() -> None:
    status = _failed(1, [FULL])
    data = status.to_json()
    assert "failed_jobs_log" not in data and FULL not in str(data)
