"""`rl_build_options`: `build_options` for RL mains, where `--run` submits a coordinator job.

Outside a cluster job, `--run` builds and validates the graph here (the dry run's code path),
then submits a small coordinator job that replays the same module and argv on the cluster.
Inside that coordinator (`$RLAUNCH_JOB_ID` is set) the same main rebuilds and revalidates the
graph and executes it with the runner; each SkyRL step hands its launch document to the host.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from rlaunch.artifacts.step import ArtifactStep, graph_handles
from rlaunch.cli.experiment import Invocation, LocalRunExecutor, make_build_options
from rlaunch.cluster.protocol import (
    JOB_ID_ENV,
    BackendUnavailableError,
    CapacityError,
    JobSpec,
    Resources,
    get_backend,
    single_replica_lines,
)
from rlaunch.names import sanitize_job_name
from rlaunch.processes import interrupt_exit, interruptible
from rlaunch.units import parse_size

if TYPE_CHECKING:
    from rlaunch.artifacts.plan import PlannedStep
    from rlaunch.judgement.judge import Authorisations, Finding
    from rlaunch.judgement.planned import PlannedLaunch
    from rlaunch.skyrl.plan.planning import Planning
    from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep

SUBMITTER = "@rl_build_options"


def skyrl_steps(handles: list[ArtifactStep[Any]]) -> list[SkyRLArtifactStep]:
    from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep

    return [s for s in graph_handles(handles) if isinstance(s, SkyRLArtifactStep)]


def step_job_steps(steps: list[ArtifactStep[Any]]) -> list[ArtifactStep[Any]]:
    """The steps that run as step jobs (a `StepExecution`)."""
    from rlaunch.step_jobs import StepExecution

    return [s for s in steps if isinstance(s.execution, StepExecution)]


def passthrough_patterns(steps: list[SkyRLArtifactStep]) -> tuple[str, ...]:
    """`env_passthrough` of every SkyRL step's runtime profile and execution: the coordinator gets
    those variables from the submitting environment and renders them into each launch document."""
    patterns: list[str] = []
    for step in steps:
        patterns += [*step.spec.runtime.runtime_profile.env_passthrough, *step.execution.env_passthrough]
    return tuple(dict.fromkeys(patterns))


class CoordinatorExecutor:
    option_names: tuple[str, ...] = ("detach", "skip_smoke_gate", "retry")

    def options(self) -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
        return [
            click.option("--detach", is_flag=True, help="Return right after submitting the coordinator."),
            click.option(
                "--skip-smoke-gate",
                metavar="REASON",
                default=None,
                help="Submit although the declared smoke has not passed, parity fails, or a large launch declares no smoke; REASON is kept in the run record.",
            ),
            click.option(
                "--retry",
                metavar="REASON",
                default=None,
                help="Relaunch a version whose latest attempt failed or was cancelled; REASON, who and when are kept in the run record.",
            ),
        ]

    def check(self, handles: list[ArtifactStep[Any]], invocation: Invocation) -> None:
        steps = skyrl_steps(handles)
        if not steps:
            raise ValueError("RL experiment did not construct a SkyRL artifact step; build one with skyrl_step(...)")
        executions = [s.execution for s in steps]
        routes = {e.route() for e in executions}
        if len(routes) != 1:
            raise ValueError(f"one RL main cannot submit through multiple cluster routes: {sorted(map(str, routes))}")
        priorities = {e.priority for e in executions}
        if len(priorities) != 1:
            raise ValueError(
                f"one RL main cannot submit with multiple coordinator priorities: {sorted(map(str, priorities))}"
            )

    def judgement(
        self, planned: list[PlannedStep], invocation: Invocation, planning: Planning | None
    ) -> dict[str, tuple[Finding, ...] | None]:
        """Each RL step's judgement, as `--run` and the launch host would apply it now (None: served)."""
        if planning is None:
            return {}
        pending = {id(p.step) for p in planned if p.action in ("run", "rebuild")}
        authorised = _authorisations(invocation)
        return {
            step.identity: judgement(planning.launch(step), authorised) if id(step) in pending else None
            for step in skyrl_steps([p.step for p in planned])
        }

    def run(self, handles: list[ArtifactStep[Any]], invocation: Invocation, planning: Planning | None) -> int:
        if os.environ.get(JOB_ID_ENV):
            from rlaunch.runs.run_record import mark

            if _replay_refused(handles, invocation, planning):
                return 2
            mark("graph_planned")  # built and validated again here, in the coordinator
            placement = skyrl_steps(handles)[0].execution.placement()  # one route for every RL step (`check`)
            return LocalRunExecutor(submitter=SUBMITTER, retry=_authorised_retry(), placement=placement).run(
                handles, invocation
            )
        assert planning is not None, "check() refused a graph without an RL step"
        return submit_coordinator(handles, invocation, planning)


def _replay_refused(handles: list[ArtifactStep[Any]], invocation: Invocation, planning: Planning | None) -> bool:
    """Inside the coordinator: whether the graph this replay of the main built is not the graph the
    submitter judged ($RLAUNCH_JUDGED). Then nothing is built: the difference is printed with its fix
    and kept in each RL step's run record (`replay_refusals`), beside its attempts."""
    from rlaunch import storage
    from rlaunch.artifacts.judged import from_env, replay_check
    from rlaunch.runs.run_record import add_entry

    assert planning is not None, "check() refused a graph without an RL step"
    replay = replay_check(from_env(os.environ), invocation.judged, os.environ)
    problems = replay.problems()
    if not problems:
        return False
    click.echo(f"error: this coordinator's replay of {invocation.module} is not the graph that was judged:", err=True)
    for problem in problems:
        click.echo(f"  {problem}", err=True)
    click.echo("Nothing was built.", err=True)
    entry = {"at": storage.utc_now(), "coordinator_job_id": os.environ.get(JOB_ID_ENV), **replay.to_json()}
    for step in skyrl_steps(handles):
        document = planning.launch(step).document
        add_entry(document.artifacts.output_path, document.run.id, "replay_refusals", entry)
    return True


def submit_coordinator(handles: list[ArtifactStep[Any]], invocation: Invocation, planning: Planning) -> int:
    from rlaunch.artifacts.judged import to_env
    from rlaunch.cluster.job_environment import job_environment
    from rlaunch.host.step_job import gang_for_check, retry_refusal
    from rlaunch.judgement.judge import refusals
    from rlaunch.launch_config.task_env import passed_through
    from rlaunch.skyrl.plan.planning import plan
    from rlaunch.skyrl.views.gate_checks import old_runtime_note
    from rlaunch.skyrl.views.submission import submission_problems

    if invocation.module is None:
        raise click.UsageError(
            "--run replays the experiment on the cluster, so run it as `python -m <package>.<module>` from the repository root"
        )
    from rlaunch.artifacts.plan import plan_graph

    steps = skyrl_steps(handles)
    prefix = invocation.prefix
    if _finalise_dead_attempts([*steps, *step_job_steps(graph_handles(handles))], prefix):
        planning = plan(steps, prefix)  # storage changed since it was planned: the gates read it as it is now
    pending = [p for p in plan_graph(handles, prefix) if p.action in ("run", "rebuild")]
    launched = [s for s in steps if any(p.step is s for p in pending)]
    problems = [  # only what launches is judged: a served step trains nothing and gates nothing
        p for s in launched for p in submission_problems(planning.launch(s), planning.facts(s), prefix)
    ]
    problems += _authorisation_problems(invocation)
    judged = [(s, judgement(planning.launch(s), _authorisations(invocation))) for s in launched]
    problems += [f"{s.identity}: {line}" for s, findings in judged for line in refusals(findings)]
    overrides = _overrides(judged) if _authorisations(invocation).skip_smoke_gate else []
    jobs = step_job_steps([p.step for p in pending])
    if not _authorisations(invocation).retry:
        problems += [p for s in jobs if (p := retry_refusal(s.identity, s.path(prefix)))]
    if problems:
        for problem in problems:
            click.echo(f"error: {problem}", err=True)
        click.echo("Nothing was submitted.", err=True)
        return 2
    if not pending:
        for handle in handles:
            click.echo(f"  served from storage {handle.identity} -> {handle.path(invocation.prefix)}")
        for step in steps:
            note = old_runtime_note(planning.launch(step).document, planning.facts(step))
            if note:
                click.echo(f"  {step.identity}: {note}")
        click.echo("Every step is served from storage; nothing to submit.")
        return 0
    executions = [s.execution for s in steps]
    execution = executions[0]
    terminal = graph_handles(handles)[-1]
    name = sanitize_job_name(f"{terminal.name}-{terminal.version}-coordinator-{uuid.uuid4().hex[:8]}")
    argv = [
        sys.executable,
        "-m",
        invocation.module,
        *_without_max_concurrent(invocation.argv),
        "--max-concurrent",
        str(invocation.max_concurrent),
    ]
    spec = JobSpec(
        name=name,
        argv=tuple(argv),
        env=job_environment(tuple(dict.fromkeys(n for s in steps for n in planning.launch(s).document.run.credentials)))
        | passed_through(passthrough_patterns(steps))
        | {"RLAUNCH_PREFIX": invocation.prefix, **_authorised_env(invocation)}
        | to_env(invocation.judged),  # the coordinator refuses to train any other graph (`_replay_refused`)
        working_dir=os.getcwd(),
        resources=Resources(
            cpu=float(execution.coordinator_cpu),
            memory_bytes=parse_size(execution.coordinator_memory),
            disk_bytes=parse_size(execution.coordinator_disk),
        ),
        timeout_seconds=max(e.coordinator_timeout_hours for e in executions) * 3600,
        labels={
            "rlaunch.kind": "coordinator",
            "rlaunch.artifact": terminal.identity,
            "rlaunch.module": invocation.module,
        },
    )
    try:
        backend = get_backend(execution.backend, **execution.placement())
        for step in steps:
            backend.check(child_gang(step), beside=spec.resources)
        for job in jobs:
            backend.check(gang_for_check(job.execution, job.name), beside=spec.resources)
        _record_overrides(overrides, invocation, planning)
        job_id = backend.submit(spec)
    except (CapacityError, BackendUnavailableError, ImportError, ConnectionError) as exc:
        click.echo(f"error: {exc}", err=True)
        click.echo("Nothing was submitted.", err=True)
        return 2
    click.echo(f"submitted RL coordinator {job_id} ({spec.name}) via {backend.name}")
    if invocation.options.get("detach"):
        click.echo(f"detached; follow with: {jobs_command(backend.name)} logs {job_id} --follow")
        return 0
    try:
        with interruptible():
            for line in single_replica_lines(backend.logs(job_id, follow=True), spec.replicas):
                click.echo(line)
            status = backend.wait(job_id)
    except KeyboardInterrupt as interrupt:  # Ctrl-C or SIGTERM: this process stops, the run does not
        command = jobs_command(backend.name)
        click.echo(
            f"\nstopped following; RL coordinator {job_id} keeps running: follow it with "
            f"`{command} logs {job_id} --follow`, stop it with `{command} cancel {job_id}`",
            err=True,
        )
        return interrupt_exit(interrupt)
    click.echo(f"RL coordinator {job_id} {status.state.value}" + (f": {status.message}" if status.message else ""))
    if status.state.value != "succeeded":
        for line in _failed_attempts(launched, prefix, job_id):
            click.echo(line, err=True)
    return 0 if status.state.value == "succeeded" else 1


def _failed_attempts(steps: list[SkyRLArtifactStep], prefix: str, coordinator_job_id: str) -> list[str]:
    """The submitter's last word: each failed attempt of this coordinator with its class and next step."""
    from rlaunch.launch_config.failures import FailureClass
    from rlaunch.runs import run_record
    from rlaunch.statefiles import CorruptStateError

    lines = []
    for step in steps:
        try:
            attempts = (run_record.read(step.path(prefix)) or {}).get("attempts") or []
        except (CorruptStateError, OSError):
            continue
        for attempt in attempts:
            found = FailureClass.from_json(attempt.get("failure_class"))
            if attempt.get("coordinator_job_id") == coordinator_job_id and attempt.get("state") == "failed" and found:
                lines.append(f"{step.identity} attempt {attempt.get('attempt_id')} failed: {found.summary()}")
    return lines


def _given(invocation: Invocation) -> dict[str, str]:
    """The gate authorisations on the command line (`retry`, `skip_smoke_gate`) -> their reasons."""
    from rlaunch.launch_config.gates import GATE_OPTIONS

    return {name: invocation.options[name] for name in GATE_OPTIONS if invocation.options.get(name) is not None}


def _authorisation_problems(invocation: Invocation) -> list[str]:
    from rlaunch.launch_config.gates import GATE_OPTIONS

    return [
        f"{GATE_OPTIONS[name]} needs a reason (it is kept in the run record)"
        for name, reason in _given(invocation).items()
        if not reason.strip()
    ]


def _authorisations(invocation: Invocation) -> Authorisations:
    """The gate authorisations given on the command line (an empty reason is refused apart)."""
    from rlaunch.cli.experiment import default_stage
    from rlaunch.judgement.judge import Authorisations

    given = {name for name, reason in _given(invocation).items() if reason.strip()}
    stage = default_stage()
    return Authorisations(
        retry="retry" in given,
        skip_smoke_gate="skip_smoke_gate" in given,
        default_stage=None if stage is None else f"{stage[0]} (choose it with --stage {stage[1]})",
    )


def judgement(planned: PlannedLaunch, authorisations: Authorisations) -> tuple[Finding, ...]:
    """The judgement of launching `planned` now, over the evidence storage holds, read as the launch
    host reads it (`rlaunch.observe.launch_evidence`)."""
    from rlaunch.judgement.judge import judge
    from rlaunch.observe.launch_evidence import launch_evidence

    return judge(planned, launch_evidence(planned.document), authorisations)


def _authorised_retry() -> dict[str, Any] | None:
    """Inside the coordinator: the `--retry` authorisation stamped at submission (step jobs read it)."""
    import json

    from rlaunch.launch_config.gates import AUTHORISED_ENV

    retry = json.loads(os.environ.get(AUTHORISED_ENV) or "{}").get("retry")
    return retry if isinstance(retry, dict) else None


def _authorised_env(invocation: Invocation) -> dict[str, str]:
    """The authorisations for the coordinator (reason, who, when), stamped once, at submission."""
    import json

    from rlaunch import storage
    from rlaunch.launch_config.gates import AUTHORISED_ENV
    from rlaunch.processes import actor
    from rlaunch.secrets import scrub

    given = {
        name: {"reason": scrub(reason), "by": actor(), "at": storage.utc_now()}
        for name, reason in _given(invocation).items()
    }
    return {AUTHORISED_ENV: json.dumps(given)} if given else {}


def _overrides(
    judged: list[tuple[SkyRLArtifactStep, tuple[Finding, ...]]],
) -> list[tuple[SkyRLArtifactStep, list[str]]]:
    """The smoke gate overrides to record once the launch is submitted: every step that declares a
    smoke or whose smoke findings --skip-smoke-gate waived, with those findings."""
    from rlaunch.judgement.judge import WAIVED

    waived = [(s, [f.message for f in findings if f.status == WAIVED]) for s, findings in judged]
    return [(s, found) for s, found in waived if s.smoke is not None or found]


def _record_overrides(
    overrides: list[tuple[SkyRLArtifactStep, list[str]]], invocation: Invocation, planning: Planning
) -> None:
    from rlaunch.cli.smoke_gate import record_override

    reason = invocation.options.get("skip_smoke_gate") or ""
    for step, problems in overrides:
        record_override(planning.launch(step).document, step, reason, problems)
        click.echo(f"smoke gate skipped for {step.identity}: {reason} (kept in the run record)", err=True)


def _finalise_dead_attempts(steps: list[ArtifactStep[Any]], prefix: str) -> bool:
    """Close earlier attempts whose processes were all killed, so the run record stays truthful;
    whether any was closed (storage changed: what was planned before must be planned again)."""
    from rlaunch.control.finalise import finalise_open_attempts

    changed = False
    for step in steps:
        closed = finalise_open_attempts(step.path(prefix), prefix, by="the next rlaunch --run")
        for attempt_id in closed:
            click.echo(f"  recorded attempt {attempt_id} of {step.identity} as ended: its jobs were gone", err=True)
        changed = changed or bool(closed)
    return changed


def jobs_command(backend: str) -> str:
    """How a person reaches a job of `backend` from a shell."""
    return "rlaunch jobs" if backend == "local" else f"rlaunch jobs --backend {backend}"


def child_gang(step: SkyRLArtifactStep) -> JobSpec:
    """The child gang an RL step will ask for, for the capacity check before anything is submitted."""
    from rlaunch.host.allocate import child_resources
    from rlaunch.skyrl.plan.launch_document import allocation

    alloc = allocation(step.spec, step.execution)
    return JobSpec(
        name=f"{step.name}-gang", argv=(sys.executable,), resources=child_resources(alloc), replicas=alloc.num_nodes
    )


def _without_max_concurrent(argv: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--max-concurrent":
            skip = True
            continue
        if arg.startswith("--max-concurrent="):
            continue
        out.append(arg)
    return out


rl_build_options = make_build_options(CoordinatorExecutor())
