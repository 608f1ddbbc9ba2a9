"""Launch readiness: what a reviewer must see stated before a large launch, each with its source.

The seed asks that, before a large launch, host resources, credentials, context budget,
checkpoint/export policy, W&B identity and the runtime's required backend fixes are explicit.
`readiness(...)` returns one item per concern: its value, where the value came from, and a state
(`ok`, `missing` - nothing states it, `warn` - stated but worth a look). Pure except for reading
the model artifact's stored facts and the submitting environment's variable *names*; a credential
value is never read into an item.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch.launch_config.composition import get_path
from rlaunch.rules.defect_triggers import findings
from rlaunch.rules.memory import gib
from rlaunch.runtimes.defects import OPEN, UNVERIFIED
from rlaunch.secrets import forwarded_names
from rlaunch.skyrl.execution import SkyRLExecution
from rlaunch.skyrl.memory_fit import MemoryReport
from rlaunch.skyrl.spec import SkyRLSpec

OK, MISSING, WARN, DEFAULT = "ok", "missing", "warn", "default"
HOST_FIELDS = ("cpu", "memory", "disk")
COORDINATOR_FIELDS = ("coordinator_cpu", "coordinator_memory", "coordinator_disk", "coordinator_timeout_hours")
# What a large launch must not leave to a default without saying so (listed by `relied_defaults`).
LAUNCH_FIELDS = (*HOST_FIELDS, *COORDINATOR_FIELDS, "job_timeout_seconds", "max_retries")
ENGINE_MAX_LEN = "generator.inference_engine.engine_init_kwargs.max_model_len"


@dataclass(frozen=True)
class ReadinessItem:
    label: str
    value: str
    source: str
    state: str = OK

    def line(self, width: int) -> str:
        mark = {OK: "[ok]", MISSING: "[MISSING]", WARN: "[check]", DEFAULT: "[default]"}[self.state]
        return f"  {mark:<9} {self.label:<{width}}  {self.value}  ({self.source})"


def readiness(
    spec: SkyRLSpec, execution: SkyRLExecution, *, export_hf: bool, memory: MemoryReport | None = None
) -> list[ReadinessItem]:
    composed = spec.composed_recipe
    return [
        *_host_resources(spec, execution),
        *_credentials(composed),
        _context_budget(spec, composed),
        *([_memory_fit(memory)] if memory is not None else []),
        _checkpoint_policy(spec, composed),
        _export_policy(composed, export_hf),
        _wandb_identity(spec, execution, composed),
        *_backend_fixes(spec, composed),
    ]


def render(items: list[ReadinessItem], *, large: bool = False, defaults: list[str] = ()) -> list[str]:
    """The readiness section; a large launch ends it with every default it would rely on."""
    width = max(len(item.label) for item in items)
    missing = sum(item.state == MISSING for item in items)
    defaulted = sum(item.state == DEFAULT for item in items)
    counts = [f"{missing} item(s) missing"] * bool(missing) + [f"{defaulted} item(s) on defaults"] * bool(defaulted)
    head = "readiness: " + ("; ".join(counts) or "every item explicit")
    lines = [head, *(item.line(width) for item in items)]
    if large and defaults:
        lines.append(f"  a large launch relying on {len(defaults)} default(s): {', '.join(defaults)}")
    return lines


def _host_resources(spec: SkyRLSpec, execution: SkyRLExecution) -> list[ReadinessItem]:
    """Per role and for the coordinator: each value, `[default]` where the experiment stated none."""
    kind = type(execution).__name__

    def value(name: str, text: str) -> str:
        return text if execution.stated(name) else f"{text} [default]"

    def item(label: str, prefix: str, names: tuple[str, ...], texts: tuple[str, ...]) -> ReadinessItem:
        defaulted = [n for n in names if not execution.stated(n)]
        source = f"{kind}({', '.join(n for n in names if n not in defaulted)})" if len(defaulted) < len(names) else ""
        if defaulted:
            source = "; ".join(filter(None, (source, f"{kind} defaults for {', '.join(defaulted)}")))
        return ReadinessItem(
            label, prefix + ", ".join(value(n, t) for n, t in zip(names, texts)), source, DEFAULT if defaulted else OK
        )

    per_node = (f"{execution.cpu:g} CPU", f"{execution.memory} memory", f"{execution.disk} disk")
    plan, topo = spec.topology.role_plan, spec.topology
    if plan.colocate_all:
        roles = [("policy+rollout", topo.num_nodes)]
    else:
        roles = [("policy hosts", plan.policy_num_nodes), ("rollout hosts", topo.num_nodes - plan.policy_num_nodes)]
    items = [item(label, f"{nodes} node(s), each ", HOST_FIELDS, per_node) for label, nodes in roles]
    coordinator = (
        f"{execution.coordinator_cpu:g} CPU",
        f"{execution.coordinator_memory} memory",
        f"{execution.coordinator_disk} disk",
        f"{execution.coordinator_timeout_hours:g}h deadline",
    )
    return [*items, item("coordinator", "", COORDINATOR_FIELDS, coordinator)]


def relied_defaults(execution: SkyRLExecution) -> list[str]:
    """Every launch setting left to its default (a large launch lists them: `name=value`)."""
    kind = type(execution).__name__
    return [f"{kind}.{n}={getattr(execution, n)!r}" for n in LAUNCH_FIELDS if not execution.stated(n)]


def _credentials(composed: Mapping[str, Any]) -> list[ReadinessItem]:
    """The credentials this recipe needs, by name, and whether each is set here (never the value)."""
    needed = {"WANDB_API_KEY": "trainer.logger is wandb"} if _uses_wandb(composed) else {}
    allowed = forwarded_names()
    items = []
    for name, why in needed.items():
        present = bool(os.environ.get(name))
        forwarded = name in allowed
        state = OK if present and forwarded else MISSING
        value = f"{name} {'set' if present else 'NOT set'} in the submitting environment"
        if not forwarded:
            value += "; not allow-listed (add it to RLAUNCH_FORWARD_CREDENTIALS)"
        items.append(ReadinessItem("credential", value, why, state))
    if not items:
        items.append(ReadinessItem("credentials", "none needed by this recipe", "trainer.logger, inputs"))
    return items


def _context_budget(spec: SkyRLSpec, composed: Mapping[str, Any]) -> ReadinessItem:
    prompt = get_path(composed, "trainer.max_prompt_length")
    generate = get_path(composed, "generator.sampling_params.max_generate_length")
    budget = (prompt or 0) + (generate or 0)
    limits, sources = [], []
    context = spec.model.stored_facts().context_length
    if context:
        limits.append(f"model context {context}")
        sources.append(f"{spec.model.step.identity} config.json")
    engine = get_path(composed, ENGINE_MAX_LEN, None)
    if engine:
        limits.append(f"engine max_model_len {engine}")
        sources.append(ENGINE_MAX_LEN)
    value = f"prompt {prompt} + generate {generate} = {budget} tokens"
    if not limits:
        return ReadinessItem(
            "context budget",
            value + " against an unknown context length (model artifact not built yet)",
            "recipe",
            WARN,
        )
    over = [lim for lim in (context, engine) if lim and budget > lim]
    return ReadinessItem(
        "context budget", f"{value} within {', '.join(limits)}", "recipe; " + ", ".join(sources), WARN if over else OK
    )


def _memory_fit(memory: MemoryReport) -> ReadinessItem:
    """Tight or unsized memory is worth a look before a large launch; a certain failure never gets here."""
    table = memory.table
    source = "model config.json, device table, recipe (rlaunch.rules.memory)"
    if table.device is None:
        return ReadinessItem("memory fit", "; ".join(table.unsized), source, WARN)
    tight = [r for r in table.rows if r.status != "ok"]
    if not tight:
        low = min(table.rows, key=lambda r: r.headroom)
        return ReadinessItem(
            "memory fit", f"every role fits; least headroom {low.role} {low.phase} {gib(low.headroom)} GiB", source
        )
    return ReadinessItem(
        "memory fit",
        "; ".join(f"{r.role} {r.phase} {r.status} (~{gib(r.estimate)} of {gib(r.capacity)} GiB)" for r in tight),
        source,
        WARN,
    )


def _checkpoint_policy(spec: SkyRLSpec, composed: Mapping[str, Any]) -> ReadinessItem:
    retention = spec.retention
    return ReadinessItem(
        "checkpoints",
        f"every {get_path(composed, 'trainer.ckpt_interval')} step(s), resume_mode "
        f"{get_path(composed, 'trainer.resume_mode')}, keep {retention.resume_checkpoint_count}, "
        f"temporary storage {retention.temporary_storage_ttl_days} day(s)",
        "recipe trainer.ckpt_interval/resume_mode; SkyRLSpec.retention",
    )


def _export_policy(composed: Mapping[str, Any], export_hf: bool) -> ReadinessItem:
    interval = get_path(composed, "trainer.hf_save_interval")
    cadence = f"every {interval} step(s)" if isinstance(interval, int) and interval > 0 else "no periodic export"
    final = "a Hugging Face export of the final step" if export_hf else "no terminal export"
    return ReadinessItem("export", f"{final}; {cadence}", "skyrl_step(export_hf); recipe trainer.hf_save_interval")


def _wandb_identity(spec: SkyRLSpec, execution: SkyRLExecution, composed: Mapping[str, Any]) -> ReadinessItem:
    if not _uses_wandb(composed):
        return ReadinessItem("W&B identity", "not used (trainer.logger is not wandb)", "recipe trainer.logger")
    entity, project = execution.wandb_entity, get_path(composed, "trainer.project_name")
    value = f"entity {entity or '?'}, project {project or '?'}, run {spec.name}@{spec.version}"
    state = OK if entity and project else MISSING
    return ReadinessItem(
        "W&B identity",
        value,
        f"{type(execution).__name__}.wandb_entity; recipe trainer.project_name; artifact identity",
        state,
    )


def _backend_fixes(spec: SkyRLSpec, composed: Mapping[str, Any]) -> list[ReadinessItem]:
    profile = spec.runtime.runtime_profile
    source = f"runtime {profile.name} known_defects, lock {profile.lock_file.name}"
    found = findings(profile, composed)
    if not found:
        return [ReadinessItem("backend fixes", f"no upstream defects listed for runtime {profile.name}", source)]

    def state(status: str, triggered: bool) -> str:
        if status == OPEN:
            return MISSING if triggered else WARN
        return WARN if status == UNVERIFIED else OK

    return [ReadinessItem("backend fix", f.line(), source, state(f.status, f.triggered)) for f in found]


def _uses_wandb(composed: Mapping[str, Any]) -> bool:
    logger = get_path(composed, "trainer.logger")
    return logger == "wandb" or (isinstance(logger, (list, tuple)) and "wandb" in logger)
