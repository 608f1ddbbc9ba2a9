"""The submission value: `prepare` it (plan, judge, check capacity, render the coordinator) and `submit` it."""

from __future__ import annotations

import dataclasses
import os
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rlaunch.artifacts.plan import PlannedStep, plan_graph
from rlaunch.artifacts.step import ArtifactStep, graph_handles
from rlaunch.cluster.protocol import (
    Backend,
    BackendUnavailableError,
    CapacityError,
    JobSpec,
    Resources,
    dependency_problem,
    get_backend,
)
from rlaunch.errors import UserError
from rlaunch.judgement.gates import recorded_attempts
from rlaunch.judgement.judge import WAIVED, Authorisations, Finding, judge, judge_step_job
from rlaunch.names import sanitize_job_name
from rlaunch.runs.sweep import LABEL as SWEEP_LABEL
from rlaunch.step_jobs import StepExecution
from rlaunch.submission.authorised import Given
from rlaunch.submission.invocation import Invocation
from rlaunch.units import parse_size

if TYPE_CHECKING:
    from rlaunch.judgement.planned import PlannedLaunch
    from rlaunch.skyrl.plan.planning import Planning
    from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep

BUILDS = ("run", "rebuild")  # the plan's actions that launch something
Judged = Mapping[str, "tuple[Finding, ...] | None"]  # identity -> its findings (None: served, not judged)


class SubmissionRefused(UserError):
    """`submit` was handed a submission whose judgement refuses it."""


def skyrl_steps(handles: list[ArtifactStep[Any]]) -> list[SkyRLArtifactStep]:
    from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep

    return [s for s in graph_handles(handles) if isinstance(s, SkyRLArtifactStep)]


def step_job_steps(steps: list[ArtifactStep[Any]]) -> list[ArtifactStep[Any]]:
    """The steps that run as step jobs (a `StepExecution`)."""
    return [s for s in steps if isinstance(s.execution, StepExecution)]


def judged_launch(planned: PlannedLaunch, authorisations: Authorisations) -> tuple[Finding, ...]:
    """The judgement of launching `planned` now, over the evidence storage holds, read as the launch
    host reads it (`rlaunch.observe.launch_evidence`)."""
    from rlaunch.observe.launch_evidence import launch_evidence

    declared = Authorisations.of(planned.document.gates).waivers  # the step's own (`skyrl_step(waivers=...)`)
    authorisations = dataclasses.replace(authorisations, waivers={**declared, **authorisations.waivers})
    return judge(planned, launch_evidence(planned), authorisations)


def judgement(
    planned: list[PlannedStep],
    planning: Planning | None,
    given: Given,
    prefix: str,
    *,
    live: Backend | None = None,
    beside: Resources | None = None,
) -> dict[str, tuple[Finding, ...] | None]:
    """Every step that launches, judged as `--run` judges it: each RL step by `judge`, each step job
    by `judge_step_job`, and each one's gang against the capacity the backend has. `live`: the
    backend `--run` submits to, asked now (each gang `beside` the coordinator); without it (the dry run) capacity is judged where it is
    known without asking (the local machine's declaration), else noted for `--run`. A served RL
    step launches nothing and is not judged (None)."""
    pending = [p.step for p in planned if p.action in BUILDS]
    authorised = given.judged()
    found: dict[str, tuple[Finding, ...] | None] = {}
    steps = skyrl_steps([p.step for p in planned])
    if planning is None or not steps:
        return found
    route = steps[0].execution  # every step's gang goes where the RL steps go (`CoordinatorExecutor.check`)
    unusable = dependency_problem(route.backend)
    reach = (Finding("backend", unusable),) if unusable else ()
    for step in steps:
        if any(step is p for p in pending):
            findings = judged_launch(planning.launch(step), authorised) + reach
            found[step.identity] = findings + capacity(route, child_gang(step), live, beside)
        else:
            found[step.identity] = None
    for job in step_job_steps(pending):
        from rlaunch.host.step_job import gang_for_check

        assert isinstance(job.execution, StepExecution)
        findings = judge_step_job(job.identity, recorded_attempts(job.path(prefix)), authorised)
        found[job.identity] = findings + capacity(route, gang_for_check(job.execution, job.name), live, beside)
    return found


def capacity(route: Any, gang: JobSpec, live: Backend | None, beside: Resources | None) -> tuple[Finding, ...]:
    """Whether `gang` fits the backend the RL execution `route` names: asked of `live`, or of the
    local machine's declaration (known without asking); a cluster's is known only by asking it."""
    try:
        if live is not None:
            live.check(gang, beside=beside)
        elif route.backend == "local":
            from rlaunch.cluster.local.capacity import Machine, check_fits

            check_fits(gang, Machine.declared())
        # else: only the cluster knows what it has free; `--run` asks it before submitting
    except CapacityError as exc:
        return (Finding("capacity", str(exc)),)
    return ()


def child_gang(step: SkyRLArtifactStep) -> JobSpec:
    """The child gang an RL step will ask for, for the capacity check before anything is submitted."""
    from rlaunch.host.allocate import child_resources
    from rlaunch.skyrl.plan.launch_document import allocation

    alloc = allocation(step.spec, step.execution)
    return JobSpec(
        name=sanitize_job_name(f"{step.name}-gang"),
        argv=(sys.executable,),
        resources=child_resources(alloc),
        replicas=alloc.num_nodes,
    )


@dataclass(frozen=True)
class Submission:
    """What `--run` submits: the graph as planned, every finding, and the coordinator that replays it."""

    invocation: Invocation
    given: Given
    planning: Planning
    planned: tuple[PlannedStep, ...]
    judged: Judged
    coordinator: JobSpec | None  # None: every step is served from storage, nothing launches
    live: Backend | None  # the backend it goes to, as `prepare` reached it (None: unreachable, or nothing to send)
    problems: tuple[str, ...] = ()  # refusals outside any step's judgement (the backend unreachable)

    @property
    def refusals(self) -> list[str]:
        """Every refusal, each naming its step: what `--run` prints before it submits nothing."""
        lines = [f"{identity}: {f.line()}" for identity, found in self.judged.items() for f in found or () if f.refuses]
        return [*self.problems, *lines]

    @property
    def fingerprints(self) -> dict[str, str]:
        """The fingerprint of every step that will build: what the coordinator must reproduce."""
        return {p.step.identity: p.step.fingerprint for p in self.planned if p.action in BUILDS}

    def smoke_overrides(self) -> list[tuple[SkyRLArtifactStep, list[str]]]:
        """The smoke gates `--skip-smoke-gate` let go: every step that declares a smoke or whose smoke
        findings it waived, with those findings (recorded in the run record once submitted)."""
        if self.given.skip_smoke_gate is None:
            return []
        out = []
        for step in skyrl_steps([p.step for p in self.planned]):
            waived = [
                f.message for f in self.judged.get(step.identity) or () if f.gate == "smoke" and f.status == WAIVED
            ]
            if self.judged.get(step.identity) is not None and (step.smoke is not None or waived):
                out.append((step, waived))
        return out


@dataclass(frozen=True)
class Submitted:
    backend: Backend
    job_id: str
    spec: JobSpec


def prepare(
    handles: list[ArtifactStep[Any]], invocation: Invocation, given: Given, planning: Planning | None = None
) -> Submission:
    """Plan, judge and check `handles` for `--run` (`planning`: the RL steps planned already, else
    planned here). Nothing is written; `submit` sends it."""
    from rlaunch.skyrl.plan.planning import plan

    if invocation.module is None:
        raise UserError(
            "--run replays the experiment on the cluster, so run it as `python -m <package>.<module>` from the "
            "repository root"
        )
    steps = skyrl_steps(handles)
    if not steps:
        raise UserError("RL experiment did not construct a SkyRL artifact step; build one with skyrl_step(...)")
    planning = planning if planning is not None else plan(steps, invocation.prefix)
    planned = plan_graph(handles, invocation.prefix)
    execution = steps[0].execution  # one route for every RL step (`CoordinatorExecutor.check`)
    pending = any(p.action in BUILDS for p in planned)
    problems: tuple[str, ...] = ()
    live: Backend | None = None
    if pending and not dependency_problem(execution.backend):  # (a missing client is a finding of `judgement`)
        try:
            live = get_backend(execution.backend, **execution.placement())
        except (BackendUnavailableError, ImportError, ConnectionError) as exc:
            problems = (f"backend: {exc}",)
    spec = coordinator_spec(handles, invocation, planning, given)
    judged = judgement(planned, planning, given, invocation.prefix, live=live, beside=spec.resources)
    return Submission(
        invocation=invocation,
        given=given,
        planning=planning,
        planned=tuple(planned),
        judged=judged,
        coordinator=spec if pending else None,
        live=live,
        problems=problems,
    )


def submit(submission: Submission) -> Submitted:
    """Record the smoke gates let go and submit the coordinator; a refused submission sends nothing."""
    from rlaunch.submission.smoke_override import record_override

    backend = submission.live
    if submission.refusals or submission.coordinator is None or backend is None:
        raise SubmissionRefused(
            "\n".join(submission.refusals) or "every step is served from storage: nothing to submit"
        )
    for step, waived in submission.smoke_overrides():
        record_override(submission.planning.launch(step).document, step, submission.given.skip_smoke_gate or "", waived)
    return Submitted(backend, backend.submit(submission.coordinator), submission.coordinator)


def coordinator_spec(
    handles: list[ArtifactStep[Any]], invocation: Invocation, planning: Planning, given: Given
) -> JobSpec:
    """The coordinator job: it replays the main, with the credentials the launches declare, the
    variables their runtimes pass through and the authorisations given, on the RL route's backend."""
    from rlaunch.artifacts.judged import to_env
    from rlaunch.cluster.job_environment import job_environment
    from rlaunch.judgement.judge import needed_credentials
    from rlaunch.launch_config.task_env import passed_through

    steps = skyrl_steps(handles)
    executions = [s.execution for s in steps]
    execution = executions[0]
    terminal = graph_handles(handles)[-1]
    credentials = tuple(dict.fromkeys(n for s in steps for n in needed_credentials(planning.launch(s))))
    return JobSpec(
        name=sanitize_job_name(f"{_submitted_as(invocation, terminal)}-coordinator-{uuid.uuid4().hex[:8]}"),
        argv=invocation.replayed_argv(sys.executable),
        env=job_environment(credentials)
        | passed_through(passthrough_patterns(steps))
        | {"RLAUNCH_PREFIX": invocation.prefix, **given.environment()}
        | to_env(invocation.judged),  # the coordinator refuses to train any other graph (`rl_options._replay_refused`)
        working_dir=os.getcwd(),
        resources=Resources(
            cpu=float(execution.coordinator_cpu),
            memory_bytes=parse_size(execution.coordinator_memory),
            disk_bytes=parse_size(execution.coordinator_disk),
        ),
        timeout_seconds=max(e.coordinator_timeout_hours for e in executions) * 3600,
        labels={
            "rlaunch.kind": "coordinator",
            "rlaunch.module": invocation.module or "",
            # a sweep's coordinator builds every variant: labelled with the sweep, never with one
            # variant's identity (a cancel of that variant before it recorded would stop them all)
            **({SWEEP_LABEL: invocation.sweep.name} if invocation.sweep else {"rlaunch.artifact": terminal.identity}),
        },
    )


def _submitted_as(invocation: Invocation, terminal: ArtifactStep[Any]) -> str:
    """What the coordinator's job name says it builds: the sweep (all its variants), else the terminal step."""
    return invocation.sweep.name if invocation.sweep is not None else f"{terminal.name}-{terminal.version}"


def variants_at_once(steps: list[SkyRLArtifactStep]) -> int | None:
    """How many of a sweep's RL gangs its coordinator builds at once: on the local backend, as many
    of the largest as fit the machine's declaration beside the coordinator (the rest queue in the
    coordinator's runner); None on a cluster, whose scheduler queues what does not fit."""
    if not steps or steps[0].execution.backend != "local":
        return None
    from rlaunch.cluster.local.capacity import Machine, at_once

    execution = steps[0].execution
    coordinator = Resources(cpu=float(execution.coordinator_cpu), memory_bytes=parse_size(execution.coordinator_memory))
    machine = Machine.declared()
    return min(at_once(child_gang(step), machine, coordinator) for step in steps)


def passthrough_patterns(steps: list[SkyRLArtifactStep]) -> tuple[str, ...]:
    """`env_passthrough` of every SkyRL step's runtime profile and execution: the coordinator gets
    those variables from the submitting environment and renders them into each launch document."""
    patterns: list[str] = []
    for step in steps:
        patterns += [*step.spec.runtime.runtime_profile.env_passthrough, *step.execution.env_passthrough]
    return tuple(dict.fromkeys(patterns))
