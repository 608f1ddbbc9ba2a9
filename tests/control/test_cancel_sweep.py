"""`rlaunch cancel` of a sweep, in process, on jobs waiting in a scripted Slurm: the sweep by its name
(each running variant's record gets its own cancel; a coordinator no variant recorded yet is found by
its `rlaunch.sweep` label), and one variant by its identity (its child only: the coordinator builds
the other variants). tests/launch/test_sweep_cancel.py cancels a real sweep end to end."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rlaunch.cluster.protocol import JobSpec
from rlaunch.cluster.slurm.backend import SlurmBackend
from rlaunch.control.cancel import cancel_sweep, run_jobs_of
from rlaunch.control.cli import cancel as cancel_command
from rlaunch.observe.resolve import resolve
from rlaunch.runs import run_record
from rlaunch.runs.sweep import SweepMembership
from tests.support.scripted_slurm import FakeSlurm, pending_job

from .conftest import jobs_root, output_path

SWEEP = "marker/rl@1~sweep-0badcafe"
OTHER = "marker/rl@1~sweep-0ddba11d"
VARIANTS = ("lr-1e-3", "lr-2e-3", "lr-3e-3")


def _job(prefix: str, slurm: FakeSlurm, job_id: str, **labels: str) -> None:
    spec = JobSpec(name=f"job-{job_id}", argv=["true"], labels=labels)
    pending_job(SlurmBackend(root=jobs_root(prefix)), job_id, spec)
    slurm.queue[job_id] = ("RUNNING", "None")


def _coordinator(prefix: str, slurm: FakeSlurm, job_id: str, sweep: str = SWEEP) -> None:
    """A sweep's coordinator, labelled as `--run` labels it: with the sweep, with no variant's identity."""
    _job(prefix, slurm, job_id, **{"rlaunch.kind": "coordinator", "rlaunch.sweep": sweep})


def _variant(prefix: str, slurm: FakeSlurm, label: str, child: str | None, sweep: str = SWEEP) -> str:
    """A variant whose latest attempt runs under coordinator 77 (with `child` running, if any)."""
    run = f"marker/rl.{label}@1"
    path = output_path(prefix, run)
    if child is not None:
        _job(prefix, slurm, child, **{"rlaunch.kind": "child"})
    placement = {"root": str(jobs_root(prefix))}
    entry = {
        "artifact": run,
        "backend": "slurm",
        "placement": placement,
        "state": "running",
        "coordinator_job_id": "77",
    }
    run_record.update_attempt(path, "r", "a1", {**entry, **({"child_job_id": child} if child else {})})
    run_record.keep_field(path, "r", "sweep", SweepMembership(sweep, label, {"lr": 1}).to_dict())
    return run


def _attempt(prefix: str, run: str) -> dict:
    (entry,) = (run_record.read(output_path(prefix, run)) or {})["attempts"]
    return entry


def test_the_sweep_cancels_every_running_variant_each_in_its_own_record(prefix: str, slurm: FakeSlurm) -> None:
    _coordinator(prefix, slurm, "77")
    first, second = _variant(prefix, slurm, VARIANTS[0], "78"), _variant(prefix, slurm, VARIANTS[1], "79")
    stranger = _variant(prefix, slurm, VARIANTS[2], "80", sweep=OTHER)  # another sweep's, running on
    done = cancel_sweep(SWEEP, prefix, "wrong grid")
    assert sorted(artifact for artifact, _ in done.variants) == sorted([first, second])
    for run in (first, second):
        entry = _attempt(prefix, run)
        assert entry["state"] == "cancelled" and entry["cancelled"]["reason"] == "wrong grid", entry
    assert _attempt(prefix, stranger)["state"] == "running" and slurm.queue["80"][0] == "RUNNING"
    # the coordinator first: stopped, it launches no queued variant while the running ones are stopped
    assert [c for c in slurm.calls if c[0] == "scancel"][0][-1] == "77", slurm.calls


def test_a_coordinator_no_variant_recorded_yet_is_found_by_its_label(prefix: str, slurm: FakeSlurm) -> None:
    _coordinator(prefix, slurm, "77")
    _coordinator(prefix, slurm, "76", sweep=OTHER)
    done = CliRunner().invoke(cancel_command, [SWEEP, "--yes", "--reason", "early"])
    assert done.exit_code == 0, done.output
    assert f"sweep {SWEEP}: coordinator 77 cancelled" in done.stdout
    assert slurm.queue["76"][0] == "RUNNING"


def test_a_variant_not_recorded_yet_is_no_run_to_cancel_alone(prefix: str, slurm: FakeSlurm) -> None:
    _coordinator(prefix, slurm, "77")
    done = CliRunner().invoke(cancel_command, [f"marker/rl.{VARIANTS[0]}@1", "--yes"])
    assert f"no RL run marker/rl.{VARIANTS[0]}@1 under" in str(done.exception), done.output
    assert slurm.queue["77"][0] == "RUNNING"  # the sweep goes on


def test_nothing_of_the_sweep_running_is_said(prefix: str, slurm: FakeSlurm) -> None:
    done = CliRunner().invoke(cancel_command, [SWEEP, "--yes"])
    assert done.exit_code == 0 and f"sweep {SWEEP}: nothing to cancel" in done.stdout, done.output


def test_one_variant_cancelled_alone_stops_its_child_not_the_coordinator(prefix: str, slurm: FakeSlurm) -> None:
    _coordinator(prefix, slurm, "77")
    run = _variant(prefix, slurm, VARIANTS[0], "78")
    _variant(prefix, slurm, VARIANTS[1], "79")
    assert [j.job_id for j in run_jobs_of(resolve(run)).live] == ["78"]
    assert [j.job_id for j in run_jobs_of(resolve(run), whole_sweep=True).live] == ["77", "78"]
    done = CliRunner().invoke(cancel_command, [run, "--yes", "--reason", "diverged"])
    assert done.exit_code == 0, done.output
    assert "77" not in done.stdout and _attempt(prefix, run)["cancelled"]["reason"] == "diverged"
    assert "scancel" in {c[0] for c in slurm.calls}
    assert not any(c[0] == "scancel" and "77" in c for c in slurm.calls), slurm.calls


@pytest.fixture(autouse=True)
def _prefix_env(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLAUNCH_PREFIX", prefix)
