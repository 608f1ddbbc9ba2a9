"""One judgement of a launch: every gate, one pure function, three callers.

`judge(planned, evidence, authorisations)` says what stands between a planned launch and its
submission. The dry run prints its findings, `--run` refuses on them before it submits a
coordinator, and the launch host (`rlaunch launch --config`) refuses on them for the document it
is given: the same function over the same evidence, so the three say the same words.

    evidence        what storage holds: the version's recorded attempts, whether it is served
                    (its terminal manifest exists), the declared smoke's attempts, the document its
                    latest attempt ran and verify-smoke's failed criteria (`rlaunch.observe.launch_evidence`)
    authorisations  what the launcher allowed: a retry, a skipped smoke gate (each with its reason)

The gates (`rlaunch.judgement.gates` holds the version, retry and smoke rules):

    version    a version is one runtime (an attempt under another runtime digest refuses it)
    retry      a failed or cancelled version is relaunched only with an authorised retry
    smoke      a declared smoke has run on this runtime, passes verify-smoke and has parity with
               the launch (`rlaunch.judgement.parity`, the code of `rlaunch parity`); a large
               launch declares one; `--skip-smoke-gate` waives these (recorded, never silent)
    calendar   a large launch uses a calendar version; elsewhere a mutable one (`dev`) is a note
    stage      a large launch names its terminal stage (`--stage` left to the experiment's default
               refuses it; the note on a small one is the CLI's)
    credentials every credential the document declares (`run.credentials`), and the one its logger
               needs (`trainer.logger: wandb` needs WANDB_API_KEY), is set, and not empty, where the
               launch is submitted from
    resume     the checkpoint a relaunch would resume was written by this run and runtime (or declared
               compatible), and a pinned one (`runtime.resume_from`) is the one pinned (`rlaunch.runs.resume`)
    large      a launch declared small (`is_smoke`, or thresholds raised on its execution) that the
               default thresholds call large says why: `--waive large=REASON` (recorded, never silent)
    storage    its outputs and temporary files can be written where they go
    memory     on a large launch, a memory row estimated over its device refuses unless waived
               (`--waive memory=REASON`), and so does a derived model whose step declares no
               architecture (no model rule could judge it); on a small one each is a note

Only what launches is judged: a served version launches nothing, so it has no findings. Large is
the seed's sense: more nodes or GPUs than the stated thresholds, whatever the accelerator, or than
the declared smoke that rehearses it; a run declared as a smoke (or a rehearsal runtime's) is
never large, but a declaration that makes a launch small which the default thresholds call large
is a waiver, and a waiver names its reason.

Step jobs are judged too (`judge_step_job`): a failed or cancelled one is relaunched only with an
authorised retry, in the RL step's words.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlaunch.judgement.gates import (
    credentials_problem,
    logger_credentials,
    retry_problem,
    smoke_not_run,
    smoke_problem,
    smoke_runtime_problem,
    version_problem,
)
from rlaunch.judgement.parity import smoke_parity
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.recipe_keys import TRAINER
from rlaunch.launch_config.schema import GatesSection, SkyRLLaunchConfig
from rlaunch.names import is_mutable
from rlaunch.rules.memory import gib

REFUSED, WAIVED, NOTE = "refused", "waived", "note"
DEFAULT_GATES = GatesSection()  # the thresholds a launch is measured by when it declares itself small


@dataclass(frozen=True)
class SmokeEvidence:
    """What storage holds of the declared smoke, read as `rlaunch verify-smoke` reads it."""

    identity: str
    attempts: tuple[Mapping[str, Any], ...] = ()
    document: SkyRLLaunchConfig | None = None  # the document its latest attempt ran (None: none readable)
    failed: tuple[str, ...] = ()  # verify-smoke's failed criteria of that attempt, "name: evidence"


@dataclass(frozen=True)
class Evidence:
    attempts: tuple[Mapping[str, Any], ...] = ()  # this version's attempts, without the one being launched
    served: bool = False  # the terminal manifest exists: nothing launches
    smoke: SmokeEvidence | None = None  # None: no smoke declared
    # The credentials the launch needs (`needed_credentials`) as the submitting environment holds
    # them: "set" or "" (empty); an unset name is absent. Never their values (`credentials_present`).
    credentials: Mapping[str, str] = field(default_factory=dict)
    resume: str | None = None  # why the checkpoint it would resume (or its pin) may not be (`runs.resume`)
    storage: tuple[str, ...] = ()  # why its outputs or temporary files cannot be written (`storage.writable_problem`)


def needed_credentials(planned: PlannedLaunch) -> tuple[str, ...]:
    """Every credential the launch needs where it is submitted: those its document declares and the
    one its logger reads (`judgement.gates.logger_credentials`)."""
    logger = logger_credentials(get_path(planned.composed, TRAINER.LOGGER))
    return tuple(dict.fromkeys((*planned.document.run.credentials, *logger)))


def credentials_present(declared: Sequence[str], env: Mapping[str, str]) -> dict[str, str]:
    """Which declared credentials `env` sets (non-empty: "set") or leaves empty (""), without values."""
    return {name: "set" if env[name] else "" for name in declared if name in env}


@dataclass(frozen=True)
class Authorisations:
    """The gate authorisations a launch carries (their reasons travel in the run record)."""

    retry: bool = False
    skip_smoke_gate: bool = False
    # The terminal stage when it came from the experiment's default, with how to choose it (None:
    # chosen on the command line; a document handed to the host has no stage of its own).
    default_stage: str | None = None
    waivers: Mapping[str, str] = field(default_factory=dict)  # gate (`WAIVABLE`) -> the reason given

    @classmethod
    def of(cls, gates: GatesSection) -> Authorisations:
        """The authorisations a launch document carries (the host's, and the coordinator's)."""
        return cls(
            retry=gates.retry is not None,
            skip_smoke_gate=gates.skip_smoke_gate is not None,
            waivers={gate: waiver.reason for gate, waiver in gates.waivers.items()},
        )

    def waivable(self, gate: str, found: str, remedy: str) -> Finding:
        """A finding of a waivable gate: refused with its remedy, or waived naming the reason given
        (`--waive GATE=REASON`, or the step's own `waivers`)."""
        reason = self.waivers.get(gate)
        if reason is None:
            return Finding(gate, f"{found}: {remedy}")
        return Finding(gate, f"{found} (waived: {reason})", WAIVED)


@dataclass(frozen=True)
class Finding:
    gate: str
    message: str
    status: str = REFUSED  # refused | waived (an authorisation lets it go; recorded) | note

    @property
    def refuses(self) -> bool:
        return self.status == REFUSED

    def line(self) -> str:
        return f"{self.gate}: {self.message}"


def refusals(findings: Sequence[Finding]) -> list[str]:
    """The words every caller refuses with, one line per refusing finding."""
    return [f.line() for f in findings if f.refuses]


def large(planned: PlannedLaunch) -> str | None:
    """Why the launch counts as large (None: small): more nodes or GPUs than the gates' thresholds,
    or than the declared smoke that rehearses it. A declared smoke rehearses a large launch and a
    rehearsal runtime never trains: neither is large."""
    if planned.document.gates.is_smoke or planned.profile.rehearsal:
        return None
    return _larger_than(planned.document.gates, planned)


def _larger_than(
    gates: GatesSection, planned: PlannedLaunch, threshold: str = "the smoke gate's threshold"
) -> str | None:
    """Why `planned` is larger than `gates`' thresholds or its declared smoke (None: it is not)."""
    alloc = planned.document.cluster.allocation
    if alloc.num_nodes > gates.smoke_gate_nodes:
        return f"it allocates {alloc.num_nodes} nodes (more than {threshold} of {gates.smoke_gate_nodes})"
    if planned.gpus > gates.smoke_gate_gpus:
        return f"it allocates {planned.gpus} GPUs (more than {threshold} of {gates.smoke_gate_gpus})"
    smoke = gates.smoke
    if smoke is not None and smoke.num_nodes and alloc.num_nodes > smoke.num_nodes:
        return f"it allocates {alloc.num_nodes} nodes (more than its smoke {smoke.identity}: {smoke.num_nodes})"
    allocated = alloc.num_nodes * alloc.gpus_per_node
    if smoke is not None and smoke.gpus and allocated > smoke.gpus:
        return f"it allocates {allocated} GPUs (more than its smoke {smoke.identity}: {smoke.gpus})"
    return None


def declared_small(planned: PlannedLaunch) -> str | None:
    """Why the default thresholds would call a launch large that its declaration (`is_smoke`, or
    thresholds raised on its execution) makes small (None: it is small by default, large anyway, or
    a rehearsal runtime's, which never trains)."""
    gates = planned.document.gates
    if planned.profile.rehearsal or large(planned) is not None:
        return None
    defaults = dataclasses.replace(
        gates, smoke_gate_nodes=DEFAULT_GATES.smoke_gate_nodes, smoke_gate_gpus=DEFAULT_GATES.smoke_gate_gpus
    )
    why = _larger_than(defaults, planned, "the default threshold")
    if why is None:
        return None
    declared = ["it is declared a smoke (is_smoke=True)"] if gates.is_smoke else []
    raised = [
        f"{name}={getattr(gates, name)}"
        for name in ("smoke_gate_nodes", "smoke_gate_gpus")
        if getattr(gates, name) > getattr(DEFAULT_GATES, name)
    ]
    if raised:
        declared.append(f"its execution raises the smoke gate's thresholds ({', '.join(raised)})")
    return f"{' and '.join(declared)}, yet {why}"


def version_name(document: SkyRLLaunchConfig) -> str:
    """The RL artifact's version (`run.artifact` is name@version; the run id without one)."""
    return (document.run.artifact or document.run.id).rpartition("@")[2]


def judge(planned: PlannedLaunch, evidence: Evidence, authorisations: Authorisations) -> tuple[Finding, ...]:
    """Every gate's findings for launching `planned` now (empty: it may go)."""
    if evidence.served:
        return ()
    document = planned.document
    runtime = document.runtime
    found = [
        Finding("version", p)
        for p in [
            version_problem(
                evidence.attempts,
                runtime.source_digest,
                runtime.compatible_checkpoint_digests,
                pinned=runtime.resume_from is not None,
            )
        ]
        if p
    ]
    found += [Finding("retry", p) for p in [retry_problem(evidence.attempts, authorisations.retry)] if p]
    smoke_status = WAIVED if authorisations.skip_smoke_gate else REFUSED
    why_large = large(planned)
    if document.gates.smoke is None:
        problem = smoke_problem(why_large)
        found += [Finding("smoke", problem, smoke_status)] if problem else []
    else:
        found += [Finding("smoke", p, smoke_status) for p in smoke_problems(planned, evidence.smoke)]
    if why_large and authorisations.default_stage:
        found.append(
            Finding(
                "stage",
                f"this is a large launch ({why_large}) whose terminal stage came from the experiment's default: "
                f"--stage {authorisations.default_stage}; a default stage may add downstream GPU work",
            )
        )
    missing = credentials_problem(document.run.credentials, evidence.credentials)
    found += [Finding("credentials", missing)] if missing else []
    logger = get_path(planned.composed, TRAINER.LOGGER)
    missing = credentials_problem(logger_credentials(logger), evidence.credentials, logger=logger)
    found += [Finding("credentials", missing)] if missing else []
    found += [Finding("resume", evidence.resume)] if evidence.resume else []
    found += [Finding("storage", problem) for problem in evidence.storage]
    small = declared_small(planned)
    if small:
        found.append(
            authorisations.waivable(
                "large",
                small,
                'a launch declared small must say why: pass --waive large="<reason>" (kept in the run record), or '
                "shrink it to the default thresholds",
            )
        )
    found += memory_findings(planned, why_large, authorisations)
    found += undeclared_model_findings(planned, why_large, authorisations)
    if why_large and is_mutable(version_name(document)):
        found.append(
            Finding(
                "calendar version",
                f"this is a large launch ({why_large}) under the mutable version {version_name(document)!r}, which "
                "is rebuilt on every run: give it a calendar version (--version YYYY.MM.DD)",
            )
        )
    elif is_mutable(version_name(document)):
        found.append(
            Finding(
                "calendar version",
                f"the mutable version {version_name(document)!r} is rebuilt on every run: fine for a smoke or a dev "
                "run; a real experiment uses a calendar version (--version YYYY.MM.DD)",
                NOTE,
            )
        )
    return tuple(found)


def memory_findings(planned: PlannedLaunch, why_large: str | None, authorisations: Authorisations) -> list[Finding]:
    """A row estimated over its device: on a large launch it refuses unless waived (an estimate, but
    a large launch is where an OOM after allocation costs most); on a small one it is a note."""
    found = []
    for row in planned.memory.rows:
        if row.status != "over (estimate)":
            continue
        over = (
            f"{row.role} {row.phase} is estimated at {gib(row.estimate)} GiB per device, over the device's "
            f"{gib(row.capacity)} GiB ({row.detail})"
        )
        if why_large is None:
            found.append(Finding("memory", f"{over}; an estimate on a small launch: watch it for OOM", NOTE))
            continue
        found.append(
            authorisations.waivable(
                "memory",
                f"this is a large launch ({why_large}) and {over}",
                'shrink what that row holds (rlaunch fit shows plans that fit), or pass --waive memory="<reason>" '
                "(kept in the run record)",
            )
        )
    return found


def undeclared_model_findings(
    planned: PlannedLaunch, why_large: str | None, authorisations: Authorisations
) -> list[Finding]:
    """A model no rule could judge because its step declares no architecture (a derived model: the
    document's `inputs.model.unsized_reason`): on a large launch it refuses unless waived, since the
    context, heads and memory rules all stood aside; on a small one it is a note."""
    model = planned.document.inputs.model
    if model.hf_config or not model.unsized_reason:
        return []
    if why_large is None:
        return [Finding("memory", f"{model.unsized_reason}; unchecked on a small launch", NOTE)]
    return [
        authorisations.waivable(
            "memory",
            f"this is a large launch ({why_large}) and {model.unsized_reason}",
            'declare it, or pass --waive memory="<reason>" (kept in the run record)',
        )
    ]


def judge_step_job(
    identity: str, attempts: Sequence[Mapping[str, Any]], authorisations: Authorisations
) -> tuple[Finding, ...]:
    """A step job's findings for launching it now: a failed or cancelled one is a retry (empty: it may go)."""
    problem = retry_problem(attempts, authorisations.retry)
    return (Finding("retry", problem),) if problem else ()


def smoke_problems(planned: PlannedLaunch, smoke: SmokeEvidence | None) -> list[str]:
    """Why the declared smoke does not yet open the gate: it has not run on this runtime, it fails
    verify-smoke, or the launch differs from it in what a smoke must rehearse."""
    declared = planned.document.gates.smoke
    assert declared is not None
    if smoke is None or not smoke.attempts:
        return [smoke_not_run(declared.identity)]
    found = [
        p
        for p in [smoke_runtime_problem(smoke.attempts[-1], declared.identity, planned.document.runtime.source_digest)]
        if p
    ]
    found += [f"smoke {declared.identity} does not pass verify-smoke: {c}" for c in smoke.failed]
    found += smoke_parity(planned, declared.identity, smoke.attempts, smoke.document).problems()
    return found
