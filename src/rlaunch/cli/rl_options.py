"""`rl_build_options`: `build_options` for RL mains, where `--run` submits a coordinator job.

Outside a cluster job, `--run` prepares the submission (`rlaunch.submission.submission`: the graph
planned and judged, the dry run's code path, capacity asked of the backend) and submits a small
coordinator job that replays the same module and argv on the cluster. Inside that coordinator
(`$RLAUNCH_JOB_ID` is set) the same main rebuilds and revalidates the graph and executes it with the
runner; each SkyRL step hands its launch document to the host. This module parses and prints.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from rlaunch.artifacts.step import ArtifactStep, graph_handles
from rlaunch.cli.experiment import LocalRunExecutor, make_build_options
from rlaunch.cluster.protocol import JOB_ID_ENV, single_replica_lines
from rlaunch.launch_config.schema import WAIVABLE
from rlaunch.processes import interrupt_exit, interruptible
from rlaunch.submission.authorised import Given
from rlaunch.submission.invocation import Invocation
from rlaunch.submission.submission import skyrl_steps, step_job_steps, variants_at_once

if TYPE_CHECKING:
    from rlaunch.artifacts.plan import PlannedStep
    from rlaunch.judgement.judge import Finding
    from rlaunch.skyrl.plan.planning import Planning
    from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep
    from rlaunch.submission.submission import Submission, Submitted

SUBMITTER = "@rl_build_options"


def _reason(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A gate authorisation's reason: given, it must say something (it is kept in the run record)."""
    if value is not None and not value.strip():
        raise click.BadParameter("needs a reason (it is kept in the run record)")
    return value


def _waivers(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """`--waive GATE=REASON`, repeatable: the waivable gates let go, each with its reason."""
    found: dict[str, str] = {}
    for raw in values:
        gate, sep, reason = raw.partition("=")
        gate = gate.strip()
        if not sep or gate not in WAIVABLE:
            raise click.BadParameter(f"{gate!r} is not GATE=REASON with GATE one of {', '.join(WAIVABLE)}")
        if not reason.strip():
            raise click.BadParameter(f"{gate} needs a reason (it is kept in the run record)")
        if gate in found:
            raise click.BadParameter(f"{gate} is waived twice; keep one --waive {gate}=...")
        found[gate] = reason.strip()
    return found


class CoordinatorExecutor:
    option_names: tuple[str, ...] = ("detach", "skip_smoke_gate", "retry", "waive")

    def options(self) -> list[Callable[[Callable[..., Any]], Callable[..., Any]]]:
        return [
            click.option("--detach", is_flag=True, help="Return right after submitting the coordinator."),
            click.option(
                "--skip-smoke-gate",
                metavar="REASON",
                default=None,
                callback=_reason,
                help="Submit although the declared smoke has not passed, parity fails, or a large launch declares no smoke; REASON is kept in the run record.",
            ),
            click.option(
                "--retry",
                metavar="REASON",
                default=None,
                callback=_reason,
                help="Relaunch a version whose latest attempt failed or was cancelled; REASON, who and when are kept in the run record.",
            ),
            click.option(
                "--waive",
                metavar="GATE=REASON",
                multiple=True,
                callback=_waivers,
                help=f"Let a gate go with a reason kept in the run record: {', '.join(WAIVABLE)} (a launch declared "
                "small though the default thresholds call it large; a large launch's memory estimated over its device).",
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
        """Each step's judgement, as `--run` and the launch host would apply it now (None: served)."""
        from rlaunch.submission.submission import judgement

        return judgement(planned, planning, given(invocation), invocation.prefix)

    def run(self, handles: list[ArtifactStep[Any]], invocation: Invocation, planning: Planning | None) -> int:
        if os.environ.get(JOB_ID_ENV):
            from rlaunch.runs.run_record import mark

            if _replay_refused(handles, invocation, planning):
                return 2
            mark("graph_planned")  # built and validated again here, in the coordinator
            placement = skyrl_steps(handles)[0].execution.placement()  # one route for every RL step (`check`)
            invocation = within_capacity(invocation, handles)
            return LocalRunExecutor(submitter=SUBMITTER, retry=_authorised_retry(), placement=placement).run(
                handles, invocation
            )
        assert planning is not None, "check() refused a graph without an RL step"
        return submit_coordinator(handles, invocation, planning)


def within_capacity(invocation: Invocation, handles: list[ArtifactStep[Any]]) -> Invocation:
    """A sweep's coordinator builds at most as many steps at once as its variants' gangs fit the
    backend side by side (`variants_at_once`): the rest queue, the backend is never oversubscribed."""
    import dataclasses

    sweep = invocation.sweep
    fit = None if sweep is None else variants_at_once(skyrl_steps(handles))
    if sweep is None or fit is None or fit >= invocation.max_concurrent:
        return invocation
    click.echo(f"sweep {sweep.name}: {fit} variant gang(s) fit at once; the rest queue")
    return dataclasses.replace(invocation, max_concurrent=fit)


def given(invocation: Invocation) -> Given:
    """The gate authorisations on the command line, with the terminal stage when it was defaulted."""
    from rlaunch.cli.experiment import default_stage

    stage = default_stage()
    options = invocation.options
    return Given(
        retry=options.get("retry"),
        skip_smoke_gate=options.get("skip_smoke_gate"),
        waivers=dict(options.get("waive") or {}),
        default_stage=None if stage is None else f"{stage[0]} (choose it with --stage {stage[1]})",
    )


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


def submit_coordinator(handles: list[ArtifactStep[Any]], invocation: Invocation, planning: Planning | None) -> int:
    """`--run` outside a cluster: prepare, print every refusal or submit, then follow the coordinator."""
    from rlaunch.submission.submission import prepare, submit

    if _finalise_dead_attempts([*skyrl_steps(handles), *step_job_steps(graph_handles(handles))], invocation.prefix):
        planning = None  # storage changed since it was planned: the gates read it as it is now
    submission = prepare(handles, invocation, given(invocation), planning)
    if submission.refusals:
        for problem in submission.refusals:
            click.echo(f"error: {problem}", err=True)
        click.echo("Nothing was submitted.", err=True)
        return 2
    if submission.coordinator is None:
        for line in _served_lines(submission, handles):
            click.echo(line)
        return 0
    submitted = submit(submission)
    for step, _ in submission.smoke_overrides():
        reason = submission.given.skip_smoke_gate
        click.echo(f"smoke gate skipped for {step.identity}: {reason} (kept in the run record)", err=True)
    click.echo(f"submitted RL coordinator {submitted.job_id} ({submitted.spec.name}) via {submitted.backend.name}")
    if invocation.options.get("detach"):
        click.echo(f"detached; follow with: {jobs_command(submitted.backend.name)} logs {submitted.job_id} --follow")
        return 0
    return _follow(submitted, submission)


def _served_lines(submission: Submission, handles: list[ArtifactStep[Any]]) -> list[str]:
    """What `--run` says when every step is served from storage: where each is, and a runtime changed since."""
    from rlaunch.skyrl.views.gate_checks import old_runtime_note

    prefix, planning = submission.invocation.prefix, submission.planning
    lines = [f"  served from storage {h.identity} -> {h.path(prefix)}" for h in handles]
    for step in skyrl_steps(handles):
        note = old_runtime_note(planning.launch(step).document, planning.facts(step))
        lines += [f"  {step.identity}: {note}"] if note else []
    return [*lines, "Every step is served from storage; nothing to submit."]


def _follow(submitted: Submitted, submission: Submission) -> int:
    """Stream the coordinator's log to its end; Ctrl-C stops following, never the run."""
    backend, job_id = submitted.backend, submitted.job_id
    try:
        with interruptible():
            for line in single_replica_lines(backend.logs(job_id, follow=True), submitted.spec.replicas):
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
        launched = [
            s
            for s in skyrl_steps([p.step for p in submission.planned])
            if submission.judged.get(s.identity) is not None
        ]
        for line in _failed_attempts(launched, submission.invocation.prefix, job_id):
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


def _authorised_retry() -> dict[str, Any] | None:
    """Inside the coordinator: the `--retry` authorisation stamped at submission (step jobs read it)."""
    import json

    from rlaunch.judgement.gates import AUTHORISED_ENV

    retry = json.loads(os.environ.get(AUTHORISED_ENV) or "{}").get("retry")
    return retry if isinstance(retry, dict) else None


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


rl_build_options = make_build_options(CoordinatorExecutor())
