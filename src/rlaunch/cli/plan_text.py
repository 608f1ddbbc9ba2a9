"""Rendering the plan of a graph as text for people and JSON for tools."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from rlaunch.artifacts.fingerprint import short
from rlaunch.artifacts.plan import PlannedStep
from rlaunch.artifacts.step import ArtifactStep, graph_handles
from rlaunch.cli.step_checks import sft_tables
from rlaunch.rules.memory.rows import gib
from rlaunch.step_jobs import StepExecution

if TYPE_CHECKING:
    from rlaunch.judgement.judge import Finding
    from rlaunch.skyrl.plan.planning import Planning
    from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep
    from rlaunch.submission.invocation import Sweep

Judged = dict[str, "tuple[Finding, ...] | None"]  # identity -> the judgement's findings (None: served)

ACTION_LABEL = {
    "run": "run",
    "serve": "serve from storage",
    "rebuild": "rebuild (mutable)",
    "unneeded": "not needed",
}


def _details(planned: list[PlannedStep], planning: Planning | None) -> dict[str, list[str]]:
    """The plan's lines of each RL step of the graph (a declared smoke outside it is not shown)."""
    if planning is None:
        return {}
    shown = {p.step.identity for p in planned}
    return {s.identity: step_lines(planning, s) for s in planning.runs if s.identity in shown}


def step_lines(planning: Planning, step: SkyRLArtifactStep) -> list[str]:
    """The plan of one RL step; its smoke gate reads the declared smoke's stored run with the
    judgement's reader (`observe.launch_evidence`), so the two say the same of parity."""
    from rlaunch.observe.launch_evidence import smoke_evidence
    from rlaunch.skyrl.views.plan_view import describe_step

    planned, facts, smoke = planning.view_of(step)
    declared = planned.document.gates.smoke
    return describe_step(planned, facts, smoke, None if declared is None else smoke_evidence(declared))


def _numbers(planned: list[PlannedStep], planning: Planning | None) -> dict[str, dict[str, Any]]:
    """`_details`' numbers as data (`--plan-format json`)."""
    if planning is None:
        return {}
    shown = {p.step.identity for p in planned}
    return {s.identity: planning.numbers(s) for s in planning.runs if s.identity in shown}


def judgement_lines(judged: Judged) -> list[str]:
    """The judgement of each gated step, as the dry run prints it after the plan."""
    lines = []
    for identity, findings in judged.items():
        if findings is None:
            lines.append(f"judgement of {identity}: served from storage, nothing launches, nothing is judged")
            continue
        lines.append(f"judgement of {identity} (--run and the launch host refuse on the same findings):")
        lines += [f"  {f.status}: {f.line()}" for f in findings] or ["  none: it may launch"]
        if any(f.refuses for f in findings):
            lines.append("  --run would submit nothing")
    return lines


def judgement_json(judged: Judged) -> dict[str, Any]:
    """`judgement_lines` as data: whether each step launches, its findings, whether `--run` refuses."""
    return {
        identity: {
            "launches": findings is not None,
            "refused": any(f.refuses for f in findings or ()),
            "findings": [{"gate": f.gate, "status": f.status, "message": f.message} for f in findings or ()],
        }
        for identity, findings in judged.items()
    }


def step_gpu_hours(step: ArtifactStep[Any]) -> float:
    """The most accelerator-hours a step can allocate: a step job's devices for its time limit, an
    RL step's gang for its child job's timeout (else the coordinator's deadline); 0 in the coordinator."""
    if isinstance(step.execution, StepExecution):
        return step.execution.gpu_hours
    if "rlaunch.skyrl.plan.rl_step" not in sys.modules:
        return 0.0
    from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep

    if not isinstance(step, SkyRLArtifactStep) or step.spec is None or step.execution is None:
        return 0.0
    topology, execution = step.spec.topology, step.execution
    if topology.gpu_variant.lower() == "cpu":
        return 0.0
    seconds = execution.job_timeout_seconds or execution.coordinator_timeout_hours * 3600
    return float(topology.num_nodes * topology.gpus_per_node * seconds / 3600)


def step_placement(step: ArtifactStep[Any]) -> str:
    """Where a step runs, in one line."""
    if isinstance(step.execution, StepExecution):
        return step.execution.describe()
    if "rlaunch.skyrl.plan.rl_step" in sys.modules:
        from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep

        if isinstance(step, SkyRLArtifactStep) and step.spec is not None and step.execution is not None:
            t, e = step.spec.topology, step.execution
            limit = (
                f"limit {e.job_timeout_seconds}s"
                if e.job_timeout_seconds
                else f"deadline {e.coordinator_timeout_hours:g}h"
            )
            return (
                f"RL child gang on {e.backend}: {t.num_nodes} node(s) x ({t.gpus_per_node} x {t.gpu_variant}, "
                f"{e.cpu:g} CPU, {e.memory} memory, {e.disk} disk), runtime {step.spec.runtime.profile}, {limit}"
            )
    return "in the coordinator"


def stage_gpu_hours(planned: list[PlannedStep], terminal: ArtifactStep[Any]) -> float:
    """GPU-hours a terminal stage would allocate at most: its steps that would run, not those served."""
    runs = {p.step.identity for p in planned if p.action in ("run", "rebuild")}
    return sum(step_gpu_hours(s) for s in graph_handles([terminal]) if s.identity in runs)


def placement_lines(
    planned: list[PlannedStep], handles: list[ArtifactStep[Any]], prefix: str | None = None
) -> list[str]:
    """Where each step runs, what an SFT step needs of its device's memory, and what each terminal
    stage costs in GPU-hours at most."""
    lines = ["Placement:"]
    width = max(len(p.step.identity) for p in planned)
    memory = sft_tables([p.step for p in planned], prefix)
    for p in planned:
        hours = step_gpu_hours(p.step)
        where = step_placement(p.step) + (f"  ({hours:g} GPU-hours at most)" if hours else "")
        lines.append(f"  {p.step.identity:<{width}}  {where}")
        table = memory.get(p.step.identity)
        if table is not None:
            lines += [f"  {'':<{width}}  memory: {reason}" for reason in table.unsized]
            lines += [
                f"  {'':<{width}}  memory: {r.role} {r.phase} ~{gib(r.estimate)} of {gib(r.capacity)} GiB per device "
                f"[{r.status}] ({r.detail})"
                for r in table.rows
            ]
    for handle in handles:
        lines.append(f"Stage {handle.identity}: {stage_gpu_hours(planned, handle):g} GPU-hours at most")
    return lines


def sweep_rows(sweep: Sweep, planned: list[PlannedStep], judged: Judged) -> list[dict[str, Any]]:
    """One row per variant: its terminal steps' fingerprints, the GPUs its launches ask for, the
    GPU-hours it may allocate, the judgement of its steps and which smoke gates each RL launch."""
    from rlaunch.submission.submission import skyrl_steps

    runs = {p.step.identity for p in planned if p.action in ("run", "rebuild")}
    rows = []
    for variant, terminals in sweep.variants:
        steps = graph_handles(list(terminals))
        found = [judged.get(s.identity) for s in steps if s.identity in judged]
        launches = [s for s in skyrl_steps(list(terminals)) if s.identity in runs]
        if any(f.refuses for findings in found for f in findings or ()):
            verdict = "refused"
        elif any(findings is not None for findings in found):
            verdict = "may launch"
        else:
            verdict = "served from storage"
        rows.append({
            "variant": variant.variant,
            "settings": dict(variant.settings),
            "steps": [t.identity for t in terminals],
            "fingerprint": [t.fingerprint for t in terminals],
            "gpus": sum(s.spec.topology.num_nodes * s.spec.topology.gpus_per_node for s in launches),
            "gpu_hours": sum(stage_gpu_hours(planned, t) for t in terminals),
            "verdict": verdict,
            "smoke": {
                s.identity: None if s.smoke is None else s.smoke.identity for s in skyrl_steps(list(terminals))
            },
        })  # fmt: skip
    return rows


def sweep_lines(sweep: Sweep, planned: list[PlannedStep], judged: Judged) -> list[str]:
    """The sweep's table: one line per variant (the dry run judges the sweep as a whole)."""
    rows = sweep_rows(sweep, planned, judged)
    table = [("variant", "fingerprint", "GPUs", "GPU-hours", "verdict", "gated by smoke")]
    for row in rows:
        smokes = sorted({smoke or "none declared" for smoke in row["smoke"].values()})
        fingerprints = " ".join(short(f) for f in row["fingerprint"])
        table.append(
            (row["variant"], fingerprints, str(row["gpus"]), f"{row['gpu_hours']:g}", row["verdict"], ", ".join(smokes))
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    return [
        f"Sweep {sweep.name} ({len(rows)} variants, one submission; {_queueing(sweep)}):",
        *(("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))).rstrip() for r in table),
        "",
    ]


def _queueing(sweep: Sweep) -> str:
    """How the sweep stays within the backend's capacity."""
    from rlaunch.submission.submission import skyrl_steps, variants_at_once

    fit = variants_at_once(skyrl_steps([h for _, terminals in sweep.variants for h in terminals]))
    if fit is None:
        return "the cluster's scheduler queues the gangs that do not fit"
    return f"at most {fit} variant gang(s) at once on this machine's declaration, the rest queue"


def plan_text(
    planned: list[PlannedStep],
    prefix: str,
    terminal: list[str],
    handles: list[ArtifactStep[Any]] | None = None,
    planning: Planning | None = None,
    judged: Judged | None = None,
    notes: list[str] | None = None,
    sweep: Sweep | None = None,
) -> str:
    lines: list[str] = sweep_lines(sweep, planned, judged or {}) if sweep is not None else []
    for identity, detail in _details(planned, planning).items():
        lines.append(f"== {identity} ==")
        lines.extend(detail)
        lines.append("")
    if handles:
        lines.extend(placement_lines(planned, handles, prefix))
        lines.append("")
    lines.append(f"Terminal step(s): {', '.join(terminal)}")
    lines.append(f"Plan ({len(planned)} steps, prefix {prefix}):")
    width = max(len(p.step.identity) for p in planned)
    action_width = max(len(ACTION_LABEL[p.action]) for p in planned)
    for p in planned:
        lines.append(
            f"  {p.step.identity:<{width}}  {short(p.step.fingerprint)}  {ACTION_LABEL[p.action]:<{action_width}}  {p.path}"
        )
    lines.append("")
    lines.append("Resolved versions:")
    for p in planned:
        suffix = "  (mutable — rebuilds every run)" if p.step.mutable else ""
        lines.append(f"  {p.step.identity}{suffix}")
    return "\n".join(lines + (notes or []) + judgement_lines(judged or {}))


def plan_json(
    planned: list[PlannedStep],
    prefix: str,
    terminal: list[str],
    handles: list[ArtifactStep[Any]] | None = None,
    planning: Planning | None = None,
    judged: Judged | None = None,
    notes: list[str] | None = None,
    sweep: Sweep | None = None,
) -> str:
    payload: dict[str, Any] = {
        "prefix": prefix,
        "terminal": terminal,
        "steps": [p.to_json() for p in planned],
        "details": _details(planned, planning),
        "facts": _numbers(planned, planning),
        "judgement": judgement_json(judged or {}),
        "notes": notes or [],
        "resolved_versions": [p.step.identity for p in planned],
        "step_memory": {k: t.as_dict() for k, t in sft_tables([p.step for p in planned], prefix).items()},
        "gpu_hours": {
            "steps": {p.step.identity: step_gpu_hours(p.step) for p in planned},
            "stages": {h.identity: stage_gpu_hours(planned, h) for h in handles or []},
        },
    }
    if sweep is not None:
        payload["sweep"] = {"name": sweep.name, "variants": sweep_rows(sweep, planned, judged or {})}
    return json.dumps(payload, indent=2)
