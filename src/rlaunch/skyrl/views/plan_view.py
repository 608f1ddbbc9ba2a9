"""What the plan shows for an RL step, before anything else: the numbers a reviewer checks.

A view of the launch document the step would launch (`planning.planned_document`) and its stored
facts (`stored_facts`): every number here is one the host will read, so the plan cannot say one
thing and the run do another. The smoke gate judges parity as the judgement does: against the
document the declared smoke's latest attempt ran (`judgement.parity.smoke_parity`), read by the
caller with the judgement's reader (`observe.launch_evidence`); before the smoke has run it says so,
and previews the smoke as declared.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlaunch.judgement.judge import SmokeEvidence, large
from rlaunch.judgement.parity import differences, shape_of_planned, smoke_parity
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.geometry import Geometry, plan_values
from rlaunch.launch_config.recipe_keys import SAMPLING, TRAINER
from rlaunch.launch_config.schema import CodeSection, DataInput, SkyRLLaunchConfig
from rlaunch.rules.document_subject import nearest_fits
from rlaunch.rules.fit import needs_search
from rlaunch.runs.resume import run_fingerprint
from rlaunch.skyrl.plan.stored_facts import StoredFacts
from rlaunch.skyrl.views.gate_checks import plan_rows, smoke_line
from rlaunch.skyrl.views.memory_fit import render as render_memory
from rlaunch.skyrl.views.memory_fit import render_nearest_fits
from rlaunch.skyrl.views.readiness import readiness, relied_defaults
from rlaunch.skyrl.views.readiness import render as render_readiness
from rlaunch.skyrl.views.resume_check import resume_refusal


def describe_step(
    planned: PlannedLaunch,
    facts: StoredFacts,
    smoke: PlannedLaunch | None = None,
    smoke_run: SmokeEvidence | None = None,
) -> list[str]:
    """The plan of one RL step: `planned` is what it would launch (composed once), `facts` what
    storage holds for it, `smoke` what its declared smoke would launch and `smoke_run` what storage
    holds of that smoke's run, as the judgement reads it (both None: it declares none)."""
    document, profile, composed = planned.document, planned.profile, planned.composed
    geo, plan = planned.geometry or Geometry.from_recipe(composed), plan_values(composed)
    alloc, paths, run = document.cluster.allocation, document.artifacts, document.run
    dp = geo.policy_dp or 0
    per_gpu_mini = geo.per_gpu_mini(dp) if dp else 0
    unit = "CPU slot" if profile.capabilities.accelerator == "cpu" else alloc.gpu_variant
    entrypoint = document.runtime.entrypoint
    rows = [
        (
            "runtime",
            f"{profile.name}  source digest {document.runtime.source_digest} (lock: {len(profile.lock_requirements())} packages)",
        ),
        ("entrypoint", f"{entrypoint} -> {profile.entrypoint_module(entrypoint)} (strategy {geo.strategy})"),
        (
            "allocation",
            f"{alloc.num_nodes} node(s) x {alloc.gpus_per_node} {unit}; per node {alloc.cpu:g} CPU, {alloc.memory} memory, {alloc.disk} disk; backend {document.cluster.backend}",
        ),
        ("role geometry", _geometry(geo)),
        (
            "batch sizes",
            f"train {plan['train_batch_size']} prompts, mini {plan['policy_mini_batch_size']}, micro {plan['micro_train_batch_size_per_gpu']}/device, {plan['n_samples_per_prompt']} samples/prompt",
        ),
        (
            "token budget",
            f"prompt {get_path(composed, TRAINER.MAX_PROMPT_LENGTH)} + response {get_path(composed, SAMPLING.MAX_GENERATE_LENGTH)} tokens",
        ),
        ("model", _model_line(document, facts)),
        ("train data", _data_line(document.inputs.train_data)),
        ("validation data", _data_line(document.inputs.validation_data)),
        ("outputs", paths.output_path),
        (
            "checkpoints",
            f"{paths.checkpoint_root} (keep {paths.resume_checkpoint_count}, every {get_path(composed, TRAINER.CKPT_INTERVAL)} steps, resume_mode {get_path(composed, TRAINER.RESUME_MODE)})",
        ),
        ("exports", f"{paths.export_root} (export_hf={run.export_hf})"),
        ("terminal manifest", paths.terminal_manifest_uri),
        ("resume", _resume_line(planned, facts)),
        *plan_rows(document, facts),
        ("seed", str(run.seed)),
        *_overrides_row(run.recipe_overrides),
        *_code_row(document.code),
    ]
    width = max(len(label) for label, _ in rows)
    lines = [f"{label:<{width}}  {value}" for label, value in rows]
    ref = "shared with policy" if geo.use_reference else "none (no KL)"
    rollout = f"{geo.rollout_gpus} ({'shared with policy' if geo.colocate_all else 'dedicated'})"
    critic = f", critic {geo.critic_world} ({'shared with policy' if geo.colocate_all else 'dedicated'})"
    lines += [
        "derived:",
        f"  GPUs by role        policy {geo.policy_world}, rollout {rollout}, reference {ref}"
        + (critic if geo.use_critic else ""),
        f"  policy dp           {geo.policy_dp if geo.policy_dp else 'not divisible'}",
        f"  per-device mini     {per_gpu_mini} sequences; micro {geo.micro_batch} -> {geo.gradient_accumulation or 0} gradient-accumulation step(s)",
        f"  per training step   {geo.train_batch} prompts, {geo.train_batch * geo.n_samples} samples, {geo.optimizer_steps or 0} optimizer step(s)",
    ]
    memory = planned.memory
    lines += [
        "memory per device (estimates; refused only where a lower bound exceeds the device):",
        *render_memory(memory),
        *render_nearest_fits(nearest_fits(document, profile, composed) if needs_search(memory) else []),
    ]
    lines += render_readiness(
        readiness(planned, facts),
        large=large(planned) is not None,
        defaults=relied_defaults(document),
    )
    return lines + parity_lines(planned, facts, smoke, smoke_run)


def _overrides_row(overrides: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The recipe keys set from the shell, as given (none: no row; the recipe is config_yaml's)."""
    if not overrides:
        return []
    from rlaunch.skyrl.values.overrides import RecipeOverride

    return [("overrides", "  ".join(f"--set {RecipeOverride(k, v)}" for k, v in overrides.items()))]


def _code_row(code: CodeSection | None) -> list[tuple[str, str]]:
    """The experiment's shipped code by digest, and the reward the trainer calls (none: no row)."""
    if code is None:
        return []
    reward = f"; reward {code.reward}" if code.reward else ""
    return [("shipped code", f"{', '.join(code.modules)} (sha256 {code.digest[:16]}) -> {code.uri}{reward}")]


def parity_lines(
    planned: PlannedLaunch, facts: StoredFacts, smoke: PlannedLaunch | None, smoke_run: SmokeEvidence | None
) -> list[str]:
    """The smoke gate: whether this launch needs a smoke and, with one declared, the judgement's
    parity verdict against the run that smoke stored, difference by difference; before it has run,
    that it has not, and how the smoke as declared compares."""
    declared = planned.document.gates.smoke
    if declared is None:
        return [smoke_line(planned, facts)]
    assert smoke is not None and smoke_run is not None, "a declared smoke is shown with its plan and its stored run"
    verdict = smoke_parity(planned, declared.identity, smoke_run.attempts, smoke_run.document)
    head, run = f"smoke gate: {declared.identity}", f"  smoke run: {smoke_line(planned, facts)}"
    if not verdict.ran:
        as_declared = differences(shape_of_planned(smoke), shape_of_planned(planned))
        if not as_declared:
            return [f"{head}; {verdict.problems()[0]}", "  as declared, it has this launch's shape"]
        return [
            f"{head}; {verdict.problems()[0]}",
            f"  as declared, it differs from this launch in {len(as_declared)} field(s) (its run would fail parity):",
            *(f"  {d.line()}" for d in as_declared),
        ]
    if not verdict.readable:
        return [f"{head}; {verdict.problems()[0]}", run]
    if verdict.holds:
        return [f"{head}; parity holds with the run it stored (--run also needs its verify-smoke PASS)", run]
    return [
        f"{head}; parity FAILS with the run it stored, {len(verdict.differences)} difference(s):",
        *(f"  {d.line()}" for d in verdict.differences),
        run,
    ]


def _model_line(document: SkyRLLaunchConfig, facts: StoredFacts) -> str:
    """The model artifact, the source revision it recorded or pins, and the pinned tokenizer revision."""
    model, stored = document.inputs.model, facts.model
    if stored.recorded_revision:
        source = f"recorded revision {stored.recorded_revision}"
    elif stored.facts.revision:
        source = f"pins revision {stored.facts.revision}"
    else:
        source = "no source revision (built by this graph)"
    return f"{_artifact(model.identity)} ({source}; tokenizer revision {model.tokenizer_revision})"


def _data_line(sources: tuple[DataInput, ...]) -> str:
    return ", ".join(f"{_artifact(s.identity)}/{s.relative_path}".rstrip("/") for s in sources) or "none"


def _artifact(identity: str) -> str:
    """`name@version:fingerprint` (a document's input identity) -> `name@version`."""
    return identity.split(":", 1)[0]


def _geometry(geo: Geometry) -> str:
    engines = f"{geo.engines} engine(s) x TP{geo.tp} x PP{geo.pp} x DP{geo.dp} (EP{geo.ep})"
    placement = "colocated" if geo.colocate_all else "disaggregated"
    return f"{placement}; policy {geo.policy_nodes} x {geo.policy_gpus_per_node}; rollout {engines}"


def _resume_line(planned: PlannedLaunch, facts: StoredFacts) -> str:
    document = planned.document
    if facts.served:  # only what launches resumes: a served version is read, not trained
        return f"served from storage ({document.artifacts.terminal_manifest_uri}): nothing launches, nothing resumes"
    problem = resume_refusal(planned, facts)
    if problem:
        return f"REFUSED: {problem}"
    info, pin = facts.checkpoint, document.runtime.resume_from
    if info is None and pin is not None:
        return (
            f"would resume from {pin.checkpoint_root} step {pin.step}, digest {pin.runtime_digest[:16]} (pinned); "
            f"its own checkpoints go to {document.artifacts.checkpoint_root}"
        )
    if info is None:
        return "no checkpoint yet"
    digest, fingerprint = document.runtime.source_digest, run_fingerprint(document.to_dict())
    declared = [
        f"{what} {(theirs or 'unknown')[:16]} (this run: {ours[:16]})"
        for what, theirs, ours in (
            ("runtime digest", info.runtime_digest, digest),
            ("run fingerprint", info.fingerprint, fingerprint),
        )
        if theirs != ours
    ]
    if declared:
        line = f"would resume step {info.step}, compatible by declaration: checkpoint {' and '.join(declared)}"
    else:
        line = (
            f"would resume step {info.step} (same run fingerprint {fingerprint[:16]} and runtime digest {digest[:16]})"
        )
    return line + _verified(facts)


def _verified(facts: StoredFacts) -> str:
    """What a damaged checkpoint changes: which one a resume falls back to, or that none verifies."""
    point = facts.resume_point
    if point is None or not point.skipped:
        return ""
    damaged = "; ".join(point.notes())
    if point.info is None:
        return f"; but no checkpoint matches its manifest, so the launch will be refused: {damaged}"
    return f"; but it fails its manifest, so step {point.info.step} would be resumed instead: {damaged}"
