"""What the plan shows for an RL step, before anything else: the numbers a reviewer checks."""

from __future__ import annotations

from typing import Any

from rlaunch import storage
from rlaunch.artifacts import records
from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.geometry import Geometry
from rlaunch.runs.layout import RunPaths, latest_checkpoint
from rlaunch.runs.resume import foreign_checkpoint, refusal
from rlaunch.skyrl.execution import SkyRLExecution
from rlaunch.skyrl.gate_checks import large, plan_rows, smoke_line
from rlaunch.skyrl.launch_document import live_run_paths, spec_fingerprint
from rlaunch.skyrl.memory_fit import MemoryReport, memory_report
from rlaunch.skyrl.parity import differences, shape_of_spec, shape_of_step
from rlaunch.skyrl.readiness import readiness, relied_defaults
from rlaunch.skyrl.readiness import render as render_readiness
from rlaunch.skyrl.sources import pinned_commit
from rlaunch.skyrl.spec import SkyRLSpec
from rlaunch.units import parse_size


def resume_refusal(spec: SkyRLSpec, prefix: str) -> str | None:
    """Why `--run` must be refused because of checkpoints another runtime or run wrote (None: fine)."""
    if get_path(spec.composed_recipe, "trainer.resume_mode") != "latest":
        return None
    paths = live_run_paths(spec, prefix)
    digest, fingerprint = spec.runtime.source_digest, spec_fingerprint(spec)
    info = foreign_checkpoint(paths.checkpoint_root, digest, fingerprint, spec.compatible_checkpoint_digests)
    return None if info is None else refusal(info, digest, fingerprint)


def parity_lines(spec: SkyRLSpec, execution: SkyRLExecution, export_hf: bool, smoke: Any, prefix: str) -> list[str]:
    """The smoke gate: whether this launch needs a smoke, whether parity holds with the declared
    one, difference by difference, and whether that smoke's run is still awaited."""
    if smoke is None:
        return [smoke_line(spec, execution, None, prefix)]
    found = differences(shape_of_step(smoke), shape_of_spec(spec, export_hf))
    run = f"  smoke run: {smoke_line(spec, execution, smoke, prefix)}"
    if not found:
        return [f"smoke gate: {smoke.identity}; parity holds (--run also needs its verify-smoke PASS)", run]
    return [
        f"smoke gate: {smoke.identity}; parity FAILS, {len(found)} difference(s):",
        *(f"  {d.line()}" for d in found),
        run,
    ]


def describe_step(spec: SkyRLSpec, execution: SkyRLExecution, config: dict[str, Any], smoke: Any = None) -> list[str]:
    document = config["launch_document"]
    profile = spec.runtime.runtime_profile
    composed = spec.composed_recipe
    geo = Geometry.from_recipe(composed)
    plan = spec.topology.role_plan
    topo = spec.topology
    prefix = storage.default_prefix()
    paths = live_run_paths(spec, prefix)
    dp = geo.policy_dp or 0
    per_gpu_mini = geo.per_gpu_mini(dp) if dp else 0
    unit = "CPU slot" if profile.capabilities.accelerator == "cpu" else topo.gpu_variant
    rows = [
        (
            "runtime",
            f"{profile.name}  source digest {spec.runtime.source_digest} (lock: {len(profile.lock_requirements())} packages)",
        ),
        ("entrypoint", f"{spec.entrypoint} -> {profile.entrypoint_module(spec.entrypoint)} (strategy {geo.strategy})"),
        (
            "allocation",
            f"{topo.num_nodes} node(s) x {topo.gpus_per_node} {unit}; per node {execution.cpu:g} CPU, {execution.memory} memory, {execution.disk} disk; backend {execution.backend}",
        ),
        ("role geometry", _geometry(plan, geo)),
        (
            "batch sizes",
            f"train {plan.train_batch_size} prompts, mini {plan.policy_mini_batch_size}, micro {plan.micro_train_batch_size_per_gpu}/device, {plan.n_samples_per_prompt} samples/prompt",
        ),
        (
            "token budget",
            f"prompt {get_path(composed, 'trainer.max_prompt_length')} + response {get_path(composed, 'generator.sampling_params.max_generate_length')} tokens",
        ),
        ("model", _model_line(spec)),
    ]
    for label, sources in (("train data", spec.train_data), ("validation data", spec.validation_data)):
        rows.append((label, ", ".join(f"{s.step.identity}/{s.relative_path}".rstrip("/") for s in sources) or "none"))
    rows += [
        ("outputs", paths.output_path),
        (
            "checkpoints",
            f"{paths.checkpoint_root} (keep {spec.retention.resume_checkpoint_count}, every {get_path(composed, 'trainer.ckpt_interval')} steps, resume_mode {get_path(composed, 'trainer.resume_mode')})",
        ),
        ("exports", f"{paths.export_root} (export_hf={document['run']['export_hf']})"),
        ("terminal manifest", paths.terminal_manifest_uri),
        ("resume", _resume_line(spec, prefix, paths)),
        *plan_rows(spec, prefix),
        ("seed", str(spec.seed)),
    ]
    width = max(len(label) for label, _ in rows)
    lines = [f"{label:<{width}}  {value}" for label, value in rows]
    ref = "shared with policy" if geo.use_reference else "none (no KL)"
    rollout = f"{geo.rollout_gpus} ({'shared with policy' if geo.colocate_all else 'dedicated'})"
    lines += [
        "derived:",
        f"  GPUs by role        policy {geo.policy_world}, rollout {rollout}, reference {ref}",
        f"  policy dp           {geo.policy_dp if geo.policy_dp else 'not divisible'}",
        f"  per-device mini     {per_gpu_mini} sequences; micro {geo.micro_batch} -> {geo.gradient_accumulation or 0} gradient-accumulation step(s)",
        f"  per training step   {geo.train_batch} prompts, {geo.train_batch * geo.n_samples} samples, {geo.optimizer_steps or 0} optimizer step(s)",
    ]
    memory = plan_memory(spec, execution)
    lines += ["memory per device (estimates; refused only where a lower bound exceeds the device):", *memory.lines()]
    lines += render_readiness(
        readiness(spec, execution, export_hf=document["run"]["export_hf"], memory=memory),
        large=large(spec, execution) is not None,
        defaults=relied_defaults(execution),
    )
    lines += parity_lines(spec, execution, document["run"]["export_hf"], smoke, prefix)
    return lines


def plan_memory(spec: SkyRLSpec, execution: SkyRLExecution) -> MemoryReport:
    """The memory report of the spec's plan against its model's stored (or declared) facts."""
    return memory_report(
        spec.topology,
        spec.recipe,
        spec.runtime.runtime_profile,
        spec.model.stored_facts(),
        seed=spec.seed,
        host_memory_bytes=parse_size(execution.memory, field="execution.memory"),
    )


def _model_line(spec: SkyRLSpec) -> str:
    """The model artifact, the source revision it pins or recorded, and the pinned tokenizer revision."""
    step = spec.model.step
    record = records.read_record(step.path()) or {}
    recorded = (record.get("result") or {}).get("revision")
    pinned = pinned_commit(step)
    if recorded:
        source = f"recorded revision {recorded}"
    elif pinned:
        source = f"pins revision {pinned}"
    else:
        source = "no source revision (built by this graph)"
    return f"{step.identity} ({source}; tokenizer revision {spec.model.tokenizer_revision})"


def _geometry(plan: Any, geo: Geometry) -> str:
    engines = f"{geo.engines} engine(s) x TP{geo.tp} x PP{geo.pp} x DP{geo.dp} (EP{geo.ep})"
    placement = "colocated" if geo.colocate_all else "disaggregated"
    return f"{placement}; policy {geo.policy_nodes} x {geo.policy_gpus_per_node}; rollout {engines}"


def _resume_line(spec: SkyRLSpec, prefix: str, paths: RunPaths) -> str:
    problem = resume_refusal(spec, prefix)
    if problem:
        return f"REFUSED: {problem}"
    info = latest_checkpoint(paths.checkpoint_root)
    if info is None:
        return "no checkpoint yet"
    digest, fingerprint = spec.runtime.source_digest, spec_fingerprint(spec)
    declared = [
        f"{what} {(theirs or 'unknown')[:16]} (this run: {ours[:16]})"
        for what, theirs, ours in (
            ("runtime digest", info.runtime_digest, digest),
            ("run fingerprint", info.fingerprint, fingerprint),
        )
        if theirs != ours
    ]
    if declared:
        return f"would resume step {info.step}, compatible by declaration: checkpoint {' and '.join(declared)}"
    return f"would resume step {info.step} (same run fingerprint {fingerprint[:16]} and runtime digest {digest[:16]})"
