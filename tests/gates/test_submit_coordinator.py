"""`--run`'s submission of the coordinator, in process (`rl_options.submit_coordinator`), against a
scripted backend: what is judged and refused before anything is submitted, the coordinator job
asked for (its argv, environment, resources, time limit and labels), the capacity checks beside
it, a refusal by the backend, detaching, following to the end, and an interrupt. The marker
experiment builds the graph exactly as `python -m tests.experiments.marker` does; whole `--run`
invocations on the real backends are in tests/launch and tests/gates/test_served_step.py.
"""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rlaunch.cli import rl_options
from rlaunch.cluster.protocol import CapacityError, JobSpec, JobState, JobStatus, Resources, get_backend
from rlaunch.launch_config.gates import AUTHORISED_ENV
from rlaunch.processes import Terminated
from rlaunch.runs import run_record
from tests.observe.lab import isolated_runtime_registry

VERSION = "2026.12.07"
RUN = f"marker/rl@{VERSION}"
JOB = "coordinator-1"


class Scripted:
    """A backend that takes the coordinator job, shows `lines` as its log and ends it as told."""

    name = "scripted"

    def __init__(
        self,
        state: JobState = JobState.SUCCEEDED,
        *,
        message: str | None = None,
        lines: tuple[str, ...] = (),
        refuse: Exception | None = None,
        interrupt: BaseException | None = None,
    ) -> None:
        self.state, self.message, self.lines, self.refuse, self.interrupt = state, message, lines, refuse, interrupt
        self.checked: list[tuple[JobSpec, Resources | None]] = []
        self.spec: JobSpec | None = None
        self.asked: list[str] = []

    def check(self, spec: JobSpec, *, parent: str | None = None, beside: Resources | None = None) -> None:
        self.checked.append((spec, beside))
        if self.refuse is not None:
            raise self.refuse

    def submit(self, spec: JobSpec) -> str:
        self.spec = spec
        return JOB

    def logs(self, job_id: str, *, follow: bool = False, **_: Any) -> Iterator[str]:
        self.asked.append(f"logs {job_id} follow={follow}")
        yield from self.lines
        if self.interrupt is not None:
            raise self.interrupt

    def wait(self, job_id: str) -> JobStatus:
        self.asked.append(f"wait {job_id}")
        return JobStatus(job_id=job_id, name="c", backend=self.name, state=self.state, message=self.message)


@pytest.fixture
def submit(prefix: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Runs the marker experiment's main with `--run` and the given arguments against `backend`."""
    from tests.experiments import marker

    with isolated_runtime_registry():
        monkeypatch.setenv("RLAUNCH_RUNTIME_PLUGINS", "tests.plugins.marker_runtime")
        monkeypatch.setenv("WANDB_MODE", "offline")

        def run(backend: Scripted, *args: str) -> Result:
            argv = ["--version", VERSION, "--run", *args]
            monkeypatch.setattr(sys, "argv", ["marker", *argv])
            monkeypatch.setattr(rl_options, "get_backend", lambda name, **options: backend)
            return CliRunner().invoke(marker.main, argv)

        yield run


def _attempt(prefix: str, attempt: dict[str, Any]) -> None:
    """An earlier attempt of the marker RL run, laid out in its run record."""
    output = Path(prefix) / "marker" / "rl" / VERSION
    output.mkdir(parents=True, exist_ok=True)
    (output / "run_record.json").write_text(json.dumps({"run_id": "r", "attempts": [attempt]}))


def test_the_coordinator_job_replays_the_module_with_the_runs_settings(submit: Any, prefix: str) -> None:
    backend = Scripted(lines=("[rank 0] building marker/rl", "[rank 0] built"))
    done = submit(backend, "--max-concurrent", "3")
    assert done.exit_code == 0, done.output
    spec = backend.spec
    assert spec is not None
    assert spec.argv == (
        sys.executable, "-m", "tests.experiments.marker", "--version", VERSION, "--run", "--max-concurrent", "3",
    )  # fmt: skip
    assert (
        spec.name.startswith("marker-rl-2026.12.07-coordinator-")
        and len(spec.name) == len("marker-rl-2026.12.07-coordinator-") + 8
    )
    assert spec.env["RLAUNCH_PREFIX"] == prefix and AUTHORISED_ENV not in spec.env
    assert spec.resources == Resources(cpu=1.0, memory_bytes=10**9, disk_bytes=10**9)
    assert spec.timeout_seconds == 2 * 3600  # the execution's coordinator_timeout_hours (2 by default)
    assert spec.labels == {
        "rlaunch.kind": "coordinator",
        "rlaunch.artifact": RUN,
        "rlaunch.module": "tests.experiments.marker",
    }
    [(gang, beside)] = backend.checked  # the child gang checked beside the coordinator's own resources
    assert gang.name == "marker-rl-gang" and gang.replicas == 1 and beside == spec.resources
    lines = done.output.splitlines()
    assert lines[0] == f"submitted RL coordinator {JOB} ({spec.name}) via scripted"
    assert lines[1:] == ["building marker/rl", "built", f"RL coordinator {JOB} succeeded"]
    assert backend.asked == [f"logs {JOB} follow=True", f"wait {JOB}"]


def test_max_concurrent_is_passed_once_in_either_spelling(submit: Any) -> None:
    backend = Scripted()
    done = submit(backend, "--max-concurrent=5")
    assert done.exit_code == 0, done.output
    assert backend.spec is not None and backend.spec.argv[-3:] == ("--run", "--max-concurrent", "5")


def test_detached_it_returns_at_once_saying_how_to_follow(submit: Any) -> None:
    backend = Scripted()
    done = submit(backend, "--detach")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[-1] == f"detached; follow with: rlaunch jobs --backend scripted logs {JOB} --follow"
    assert backend.asked == []


@pytest.mark.parametrize(
    ("interrupt", "code"), [(KeyboardInterrupt(), 130), (Terminated(), 143)], ids=["SIGINT", "SIGTERM"]
)
def test_an_interrupt_stops_following_and_says_what_keeps_running(
    submit: Any, interrupt: BaseException, code: int
) -> None:
    done = submit(Scripted(lines=("[rank 0] training",), interrupt=interrupt))
    assert done.exit_code == code, done.output
    command = "rlaunch jobs --backend scripted"
    assert done.output.splitlines()[-1] == (
        f"stopped following; RL coordinator {JOB} keeps running: follow it with "
        f"`{command} logs {JOB} --follow`, stop it with `{command} cancel {JOB}`"
    )
    assert signal.SIGTERM == code - 128 or signal.SIGINT == code - 128


def test_a_failed_coordinator_exits_1_with_its_message_and_each_failed_attempt(submit: Any, prefix: str) -> None:
    class Failing(Scripted):
        def wait(self, job_id: str) -> JobStatus:
            _attempt(prefix, {
                "attempt_id": "a1", "state": "failed", "coordinator_job_id": JOB,
                "failure_class": {"kind": "operational", "cause": "node failure", "where": "n2",
                                  "evidence": "NODE_FAIL", "advice": 'resubmit with --retry "node failure"'},
            })  # fmt: skip
            return super().wait(job_id)

    done = submit(Failing(JobState.FAILED, message="exit code 1"))
    assert done.exit_code == 1, done.output
    lines = done.output.splitlines()
    assert lines[-2] == f"RL coordinator {JOB} failed: exit code 1"
    assert lines[-1].startswith(f"{RUN} attempt a1 failed: operational failure, node failure"), lines[-1]


def test_a_capacity_refusal_submits_nothing(submit: Any) -> None:
    backend = Scripted(refuse=CapacityError("no node has 1 CPU free"))
    done = submit(backend)
    assert done.exit_code == 2, done.output
    assert done.output.splitlines()[-2:] == ["error: no node has 1 CPU free", "Nothing was submitted."]
    assert backend.spec is None


def test_an_empty_reason_is_refused_before_anything_is_submitted(submit: Any) -> None:
    backend = Scripted()
    done = submit(backend, "--retry", " ")
    assert done.exit_code == 2, done.output
    assert "error: --retry needs a reason (it is kept in the run record)" in done.output.splitlines()
    assert done.output.splitlines()[-1] == "Nothing was submitted."
    assert backend.spec is None and backend.checked == []


def test_a_failed_latest_attempt_is_refused_without_retry_and_submitted_with_it(submit: Any, prefix: str) -> None:
    _attempt(prefix, {"attempt_id": "a1", "state": "failed", "failure": "exit 3"})
    refused = submit(Scripted())
    assert refused.exit_code == 2, refused.output
    assert any(line.startswith(f"error: {RUN}: ") and "--retry" in line for line in refused.output.splitlines())
    backend = Scripted()
    retried = submit(backend, "--retry", "flaky disk")
    assert retried.exit_code == 0, retried.output
    assert backend.spec is not None
    given = json.loads(backend.spec.env[AUTHORISED_ENV])
    assert list(given) == ["retry"] and given["retry"]["reason"] == "flaky disk"
    assert set(given["retry"]) == {"reason", "by", "at"}


def test_an_open_attempt_whose_jobs_ended_is_closed_first_and_judged_as_closed(submit: Any, prefix: str) -> None:
    local = get_backend("local")  # a real coordinator job that ended without recording its attempt
    ended = local.submit(JobSpec(name="killed-coordinator", argv=(sys.executable, "-c", "pass")))
    assert local.wait(ended).state.terminal
    _attempt(prefix, {"attempt_id": "a0", "state": "running", "backend": "local", "coordinator_job_id": ended})
    done = submit(Scripted())
    assert "  recorded attempt a0 of marker/rl@2026.12.07 as ended: its jobs were gone" in done.output.splitlines()
    attempts = (run_record.read(str(Path(prefix) / "marker" / "rl" / VERSION)) or {})["attempts"]
    assert attempts[0]["state"] == "failed", attempts[0]
    assert done.exit_code == 2 and "--retry" in done.output, done.output  # the closed attempt failed: a retry
