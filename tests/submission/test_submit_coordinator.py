"""`--run`'s submission of the coordinator, in process (`rl_options.submit_coordinator`), against a
scripted backend: what is judged and refused before anything is submitted, the coordinator job
asked for (its argv, environment, resources, time limit and labels), the capacity checks beside
it, a refusal by the backend, detaching, following to the end, and an interrupt. The marker
experiment builds the graph exactly as `python -m tests.experiments.marker` does; whole `--run`
invocations on the real backends are in tests/launch and tests/judgement/test_served_step.py.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rlaunch.artifacts import records
from rlaunch.cli import rl_options
from rlaunch.cluster.protocol import CapacityError, JobSpec, JobState, JobStatus, Resources, get_backend
from rlaunch.errors import UserError
from rlaunch.judgement.gates import AUTHORISED_ENV
from rlaunch.processes import Terminated
from rlaunch.runs import run_record
from rlaunch.submission import Invocation
from rlaunch.submission import submission as submission_prepare
from rlaunch.submission.invocation import without_max_concurrent
from tests.support.runtime_registry import isolated_runtime_registry

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
        self.constructed: list[tuple[str, dict[str, Any]]] = []

    def named(self, name: str, options: dict[str, Any]) -> Scripted:
        """`get_backend(name, **options)`: the backend and placement the execution names."""
        self.constructed.append((name, options))
        return self

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

        def run(backend: Scripted, *args: str, before: tuple[str, ...] = (), version: str = VERSION) -> Result:
            argv = [*before, "--version", version, "--run", *args]
            monkeypatch.setattr(sys, "argv", ["marker", *argv])
            monkeypatch.setattr(submission_prepare, "get_backend", lambda name, **options: backend.named(name, options))
            return CliRunner().invoke(marker.main, argv)

        yield run


def _attempt(prefix: str, attempt: dict[str, Any]) -> None:
    """An earlier attempt of the marker RL run, laid out in its run record."""
    output = Path(prefix) / "marker" / "rl" / VERSION
    output.mkdir(parents=True, exist_ok=True)
    (output / "run_record.json").write_text(json.dumps({"run_id": "r", "attempts": [attempt]}))


def test_the_coordinator_job_replays_the_module_with_the_runs_settings(submit: Any, prefix: str) -> None:
    from tests.experiments.marker import execution

    backend = Scripted(lines=("[rank 0] building marker/rl", "[rank 0] built"))
    done = submit(backend, before=("--max-concurrent", "3"))
    assert done.exit_code == 0, done.output
    assert backend.constructed == [("local", execution("local").placement())]
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
    assert spec.working_dir == os.getcwd()
    assert spec.resources == Resources(cpu=1.0, memory_bytes=10**9, disk_bytes=10**9)
    assert spec.timeout_seconds == 2 * 3600  # the execution's coordinator_timeout_hours (2 by default)
    assert spec.labels == {
        "rlaunch.kind": "coordinator",
        "rlaunch.artifact": RUN,
        "rlaunch.module": "tests.experiments.marker",
    }
    [(gang, beside)] = backend.checked  # the child gang checked beside the coordinator's own resources
    assert gang.name == "marker-rl-gang" and gang.replicas == 1 and beside == spec.resources
    assert done.stdout.splitlines() == [
        f"submitted RL coordinator {JOB} ({spec.name}) via scripted",
        "building marker/rl",
        "built",
        f"RL coordinator {JOB} succeeded",
    ]
    assert done.stderr == ""
    assert backend.asked == [f"logs {JOB} follow=True", f"wait {JOB}"]


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--max-concurrent", "3", "--run"), ["--run"]),
        (("--run", "--max-concurrent", "3"), ["--run"]),
        (("--max-concurrent=5", "--run", "--retry", "x"), ["--run", "--retry", "x"]),
        (("--max-concurrent", "3", "--max-concurrent=4", "--detach"), ["--detach"]),
        (("--retry", "--max-concurrent-ish"), ["--retry", "--max-concurrent-ish"]),
        ((), []),
    ],
)
def test_the_replayed_argv_drops_every_max_concurrent_and_keeps_the_rest(
    argv: tuple[str, ...], expected: list[str]
) -> None:
    assert without_max_concurrent(argv) == expected


def test_a_person_reaches_a_job_with_the_backends_jobs_command() -> None:
    assert rl_options.jobs_command("local") == "rlaunch jobs"
    assert rl_options.jobs_command("slurm") == "rlaunch jobs --backend slurm"


def test_a_main_run_as_a_script_cannot_be_replayed(prefix: str) -> None:
    invocation = Invocation(module=None, argv=(), version=VERSION, max_concurrent=1, prefix=prefix)
    with pytest.raises(UserError) as refused:
        rl_options.submit_coordinator([], invocation, None)
    assert str(refused.value) == (
        "--run replays the experiment on the cluster, so run it as `python -m <package>.<module>` from the "
        "repository root"
    )


def test_max_concurrent_is_passed_once_in_either_spelling(submit: Any) -> None:
    backend = Scripted()
    done = submit(backend, before=("--max-concurrent=5",))
    assert done.exit_code == 0, done.output
    assert backend.spec is not None and backend.spec.argv[-5:] == (
        "--version",
        VERSION,
        "--run",
        "--max-concurrent",
        "5",
    )


def test_detached_it_returns_at_once_saying_how_to_follow(submit: Any) -> None:
    backend = Scripted()
    done = submit(backend, "--detach")
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[-1] == f"detached; follow with: rlaunch jobs --backend scripted logs {JOB} --follow"
    assert backend.asked == [] and done.stderr == ""


@pytest.mark.parametrize(
    ("interrupt", "code"), [(KeyboardInterrupt(), 130), (Terminated(), 143)], ids=["SIGINT", "SIGTERM"]
)
def test_an_interrupt_stops_following_and_says_what_keeps_running(
    submit: Any, interrupt: BaseException, code: int
) -> None:
    done = submit(Scripted(lines=("[rank 0] training",), interrupt=interrupt))
    assert done.exit_code == code, done.output
    command = "rlaunch jobs --backend scripted"
    assert done.stderr.splitlines() == [
        "",
        f"stopped following; RL coordinator {JOB} keeps running: follow it with "
        f"`{command} logs {JOB} --follow`, stop it with `{command} cancel {JOB}`",
    ]
    assert done.stdout.splitlines()[-1] == "training"


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
    assert done.stdout.splitlines()[-1] == f"RL coordinator {JOB} failed: exit code 1"
    [line] = done.stderr.splitlines()
    assert line.startswith(f"{RUN} attempt a1 failed: operational failure, node failure"), line


def test_a_failed_coordinator_names_only_its_own_failed_attempts(submit: Any, prefix: str) -> None:
    failure = {"kind": "operational", "cause": "node failure", "where": "n2", "evidence": "x", "advice": "y"}

    class Failing(Scripted):
        def wait(self, job_id: str) -> JobStatus:
            output = Path(prefix) / "marker" / "rl" / VERSION
            (output / "run_record.json").write_text(json.dumps({"run_id": "r", "attempts": [
                {"attempt_id": "a1", "state": "failed", "coordinator_job_id": "another", "failure_class": failure},
                {"attempt_id": "a2", "state": "cancelled", "coordinator_job_id": JOB, "failure_class": failure},
                {"attempt_id": "a3", "state": "failed", "coordinator_job_id": JOB},
                {"attempt_id": "a4", "state": "failed", "coordinator_job_id": JOB, "failure_class": failure},
            ]}))  # fmt: skip
            return super().wait(job_id)

    (Path(prefix) / "marker" / "rl" / VERSION).mkdir(parents=True)
    done = submit(Failing(JobState.CANCELLED))
    assert done.exit_code == 1, done.output
    assert done.stdout.splitlines()[-1] == f"RL coordinator {JOB} cancelled"
    assert [line.split(":")[0] for line in done.stderr.splitlines()] == [f"{RUN} attempt a4 failed"]


def test_a_capacity_refusal_submits_nothing(submit: Any) -> None:
    backend = Scripted(refuse=CapacityError("no node has 1 CPU free"))
    done = submit(backend)
    assert done.exit_code == 2, done.output
    assert done.stderr.splitlines() == [f"error: {RUN}: capacity: no node has 1 CPU free", "Nothing was submitted."]
    assert backend.spec is None and done.stdout == ""


@pytest.mark.parametrize("option", ["--retry", "--skip-smoke-gate"])
def test_an_empty_reason_is_refused_where_it_is_parsed(submit: Any, option: str) -> None:
    backend = Scripted()
    done = submit(backend, option, " ")
    assert done.exit_code == 2, done.output
    assert f"Invalid value for '{option}': needs a reason (it is kept in the run record)" in done.stderr
    assert backend.spec is None and backend.checked == [] and backend.constructed == [] and done.stdout == ""


def test_a_failed_latest_attempt_is_refused_without_retry_and_submitted_with_it(submit: Any, prefix: str) -> None:
    _attempt(prefix, {"attempt_id": "a1", "state": "failed", "failure": "exit 3"})
    refused = submit(Scripted())
    assert refused.exit_code == 2, refused.output
    *errors, last = refused.stderr.splitlines()
    assert errors and all(line.startswith(f"error: {RUN}: ") for line in errors), errors
    assert any("--retry" in line for line in errors) and last == "Nothing was submitted."
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
    assert done.stderr.splitlines()[0] == "  recorded attempt a0 of marker/rl@2026.12.07 as ended: its jobs were gone"
    attempts = (run_record.read(str(Path(prefix) / "marker" / "rl" / VERSION)) or {})["attempts"]
    assert attempts[0]["state"] == "failed", attempts[0]
    assert attempts[0]["finalised_by"].startswith("the next rlaunch --run ("), attempts[0]
    assert done.exit_code == 2 and "--retry" in done.stderr, done.output  # the closed attempt failed: a retry


def test_a_failed_step_job_needs_retry_and_is_checked_beside_the_coordinator(submit: Any, prefix: str) -> None:
    output = Path(prefix) / "marker" / "count" / VERSION
    output.mkdir(parents=True)
    attempt = {"attempt_id": "s1", "state": "failed", "failure": "KeyError: 'prompt'\nat row 3"}
    (output / "run_record.json").write_text(json.dumps({"run_id": "r", "attempts": [attempt]}))
    refused = submit(Scripted(), "--step-job")
    assert refused.exit_code == 2, refused.output
    assert refused.stderr.splitlines() == [
        "error: marker/count@2026.12.07: retry: the latest attempt s1 failed (KeyError: 'prompt'); relaunching it "
        'is a retry: pass --retry "<reason>" (who, when and why are kept in the run record), or launch a new version',
        "Nothing was submitted.",
    ]
    backend = Scripted()
    retried = submit(backend, "--step-job", "--retry", "a fixed reader")
    assert retried.exit_code == 0, retried.output
    assert backend.spec is not None
    [(gang, _), (step, beside)] = backend.checked
    assert gang.name == "marker-rl-gang" and step.name == "marker-count-step" and beside == backend.spec.resources
    assert step.resources == Resources(cpu=1.0, memory_bytes=512 * 10**6, disk_bytes=512 * 10**6)


def test_a_graph_wholly_in_storage_submits_nothing_and_says_where_it_came_from(submit: Any, prefix: str) -> None:
    output = str(Path(prefix) / "marker" / "rl" / VERSION)
    records.write_record(output, {"name": "marker/rl", "version": VERSION})
    records.write_status(output, records.SUCCEEDED)
    (Path(output) / "terminal.json").write_text(json.dumps({"state": "succeeded"}))  # the run's outcome
    old = "0" * 64  # the stored result came from another runtime than this one
    run_record_path = Path(output) / "run_record.json"
    run_record_path.write_text(json.dumps({"run_id": "r", "attempts": [
        {"attempt_id": "a1", "state": "succeeded", "runtime_digest": old},
    ]}))  # fmt: skip
    backend = Scripted()
    done = submit(backend)
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0] == f"  served from storage {RUN} -> {output}"
    assert lines[1].startswith(f"  {RUN}: served from storage: the stored result came from the old runtime "
                               f"(source digest {old[:16]}), not this one (")  # fmt: skip
    assert lines[2:] == ["Every step is served from storage; nothing to submit."]
    assert backend.constructed == [] and backend.spec is None


def test_a_mutable_version_is_rebuilt_so_it_launches(submit: Any, prefix: str) -> None:
    output = str(Path(prefix) / "marker" / "rl" / "dev")
    records.write_record(output, {"name": "marker/rl", "version": "dev"})  # built before: a mutable one rebuilds
    records.write_status(output, records.SUCCEEDED)
    backend = Scripted()
    done = submit(backend, version="dev")
    assert done.exit_code == 0, done.output
    assert backend.spec is not None and backend.spec.labels["rlaunch.artifact"] == "marker/rl@dev"


def test_a_served_rl_step_is_not_judged_while_its_downstream_step_job_launches(submit: Any, prefix: str) -> None:
    output = str(Path(prefix) / "marker" / "rl" / VERSION)
    records.write_record(output, {"name": "marker/rl", "version": VERSION})
    records.write_status(output, records.SUCCEEDED)
    (Path(output) / "terminal.json").write_text(json.dumps({"state": "succeeded"}))
    attempts = [{"attempt_id": "a1", "state": "failed", "runtime_digest": "0" * 64}]  # judged, it would be refused
    (Path(output) / "run_record.json").write_text(json.dumps({"run_id": "r", "attempts": attempts}))
    backend = Scripted()
    done = submit(backend, "--step-job")
    assert done.exit_code == 0, done.output
    assert [spec.name for spec, _ in backend.checked] == ["marker-count-step"]  # a served step allocates no gang
    assert backend.spec is not None and backend.spec.labels["rlaunch.artifact"] == "marker/count@2026.12.07"


def test_every_refusal_is_told_at_once(submit: Any, prefix: str) -> None:
    _attempt(prefix, {"attempt_id": "a1", "state": "failed", "failure": "exit 3"})
    backend = Scripted(refuse=CapacityError("no node has 1 CPU free"))
    done = submit(backend)
    assert done.exit_code == 2, done.output
    errors = done.stderr.splitlines()
    assert errors[-1] == "Nothing was submitted."
    assert any(line.startswith(f"error: {RUN}: retry: ") for line in errors), errors
    assert f"error: {RUN}: capacity: no node has 1 CPU free" in errors


def test_a_succeeded_coordinator_names_no_failed_attempt(submit: Any, prefix: str) -> None:
    class Recorded(Scripted):
        def wait(self, job_id: str) -> JobStatus:
            failure = {"kind": "operational", "cause": "node failure", "where": "n2", "evidence": "x", "advice": "y"}
            attempt = {"attempt_id": "a1", "state": "failed", "coordinator_job_id": JOB, "failure_class": failure}
            _attempt(prefix, attempt)  # a step of this coordinator failed once and was retried within it
            return super().wait(job_id)

    done = submit(Recorded())
    assert done.exit_code == 0, done.output
    assert done.stdout.splitlines()[-1] == f"RL coordinator {JOB} succeeded" and done.stderr == ""


def test_the_backend_is_asked_for_with_the_executions_placement(submit: Any) -> None:
    from tests.experiments.marker import execution

    backend = Scripted()
    done = submit(backend, "--backend", "slurm")
    assert done.exit_code == 0, done.output
    placement = execution("slurm").placement()
    assert placement and backend.constructed == [("slurm", placement)]


def test_the_coordinator_is_told_the_prefix_also_when_it_came_from_the_default(
    submit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RLAUNCH_PREFIX")  # ./rlaunch-artifacts under the working directory
    backend = Scripted()
    done = submit(backend)
    assert done.exit_code == 0, done.output
    assert backend.spec is not None and backend.spec.env["RLAUNCH_PREFIX"] == os.path.abspath("rlaunch-artifacts")


def test_a_failed_step_jobs_retry_is_in_the_dry_run_in_the_words_run_refuses_with(
    submit: Any, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step jobs' retry gate is a finding of the one judgement (`judge_step_job`): the plan shows it
    under the step job, and `--run` refuses with that line."""
    from tests.experiments import marker

    output = Path(prefix) / "marker" / "count" / VERSION
    output.mkdir(parents=True)
    attempt = {"attempt_id": "s1", "state": "failed", "failure": "KeyError: 'prompt'\nat row 3"}
    (output / "run_record.json").write_text(json.dumps({"run_id": "r", "attempts": [attempt]}))
    monkeypatch.setattr(sys, "argv", ["marker", "--version", VERSION, "--step-job"])
    plan = CliRunner().invoke(marker.main, ["--version", VERSION, "--step-job"])
    assert plan.exit_code == 0, plan.output
    lines = plan.stdout.splitlines()
    start = lines.index("judgement of marker/count@2026.12.07 (--run and the launch host refuse on the same findings):")
    said = lines[start + 1]
    assert said.startswith("  refused: retry: the latest attempt s1 failed (KeyError: 'prompt')"), lines[start:]
    refused = submit(Scripted(), "--step-job")
    assert refused.exit_code == 2, refused.output
    assert f"error: marker/count@2026.12.07: {said.removeprefix('  refused: ')}" in refused.stderr.splitlines()
