"""Launch readiness: what a reviewer must see stated before a large launch, each with its source.

The seed asks that, before a large launch, host resources, credentials, context budget,
checkpoint/export policy, W&B identity and the runtime's required backend fixes are explicit.
`readiness(planned, facts)` reads the planned launch (the document a step would launch, composed
once, with its memory table) and its stored facts, and returns one item per concern: its value,
where the value came from, and a state (`ok`, `missing` - nothing states it, `warn` - stated but worth a look,
`default` - the experiment left it to its execution's default, as the document's
`cluster.defaults` says). It reads the submitting environment's variable *names* only; a
credential value is never read into an item.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.geometry import Geometry
from rlaunch.launch_config.recipe_keys import ENGINE, SAMPLING, TRAINER
from rlaunch.launch_config.schema import RunSection, SkyRLLaunchConfig
from rlaunch.rules.defect_triggers import findings
from rlaunch.rules.memory import MemoryTable, gib
from rlaunch.runtimes.defects import OPEN, UNVERIFIED
from rlaunch.runtimes.registry import RuntimeProfile
from rlaunch.secrets import forwarded_names
from rlaunch.skyrl.plan.stored_facts import StoredFacts

OK, MISSING, WARN, DEFAULT = "ok", "missing", "warn", "default"
HOST_FIELDS = ("cpu", "memory", "disk")
COORDINATOR_FIELDS = ("coordinator_cpu", "coordinator_memory", "coordinator_disk", "coordinator_timeout_hours")
ENGINE_MAX_LEN = ENGINE.MAX_MODEL_LEN


@dataclass(frozen=True)
class ReadinessItem:
    label: str
    value: str
    source: str
    state: str = OK

    def line(self, width: int) -> str:
        mark = {OK: "[ok]", MISSING: "[MISSING]", WARN: "[check]", DEFAULT: "[default]"}[self.state]
        return f"  {mark:<9} {self.label:<{width}}  {self.value}  ({self.source})"


def readiness(planned: PlannedLaunch, facts: StoredFacts) -> list[ReadinessItem]:
    """One item per concern of the `planned` launch (its document, recipe composed once, geometry and
    memory table) and its stored facts."""
    document, composed = planned.document, planned.composed
    geometry = planned.geometry or Geometry.from_recipe(composed)
    return [
        *_host_resources(document, composed, geometry),
        *_credentials(document, composed),
        _context_budget(document, facts, composed),
        _memory_fit(planned.memory),
        _checkpoint_policy(document, composed),
        _export_policy(composed, document.run),
        _wandb_identity(document, composed),
        *_backend_fixes(planned.profile, composed, geometry),
    ]


def render(items: list[ReadinessItem], *, large: bool = False, defaults: Sequence[str] = ()) -> list[str]:
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


def launch_values(document: SkyRLLaunchConfig) -> dict[str, Any]:
    """Each launch setting an execution states (its field name) -> its value in the document."""
    cluster, alloc, coordinator = document.cluster, document.cluster.allocation, document.cluster.coordinator
    values: dict[str, Any] = {
        "cpu": alloc.cpu,
        "memory": alloc.memory,
        "disk": alloc.disk,
        "job_timeout_seconds": cluster.timeout_seconds,
        "max_retries": cluster.max_retries,
    }
    if coordinator is not None:
        values |= {
            "coordinator_cpu": coordinator.cpu,
            "coordinator_memory": coordinator.memory,
            "coordinator_disk": coordinator.disk,
            "coordinator_timeout_hours": coordinator.timeout_hours,
        }
    return values


def _host_resources(document: SkyRLLaunchConfig, composed: Mapping[str, Any], geo: Geometry) -> list[ReadinessItem]:
    """Per role and for the coordinator: each value, `[default]` where the experiment stated none."""
    cluster = document.cluster
    kind, defaults, values = cluster.execution or "the launch document", set(cluster.defaults), launch_values(document)

    def value(name: str, text: str) -> str:
        return f"{text} [default]" if name in defaults else text

    def item(label: str, prefix: str, names: tuple[str, ...], texts: tuple[str, ...]) -> ReadinessItem:
        defaulted = [n for n in names if n in defaults]
        source = f"{kind}({', '.join(n for n in names if n not in defaulted)})" if len(defaulted) < len(names) else ""
        if defaulted:
            source = "; ".join(filter(None, (source, f"{kind} defaults for {', '.join(defaulted)}")))
        return ReadinessItem(
            label, prefix + ", ".join(value(n, t) for n, t in zip(names, texts)), source, DEFAULT if defaulted else OK
        )

    alloc = cluster.allocation
    per_node = (f"{alloc.cpu:g} CPU", f"{alloc.memory} memory", f"{alloc.disk} disk")
    if geo.colocate_all:
        roles = [("policy+rollout", alloc.num_nodes)]
    else:
        roles = [("policy hosts", geo.policy_nodes), ("rollout hosts", alloc.num_nodes - geo.policy_nodes)]
    items = [item(label, f"{nodes} node(s), each ", HOST_FIELDS, per_node) for label, nodes in roles]
    if "coordinator_cpu" not in values:
        return [
            *items,
            ReadinessItem("coordinator", "not stated", "the launch document has no cluster.coordinator", MISSING),
        ]
    coordinator = (
        f"{values['coordinator_cpu']:g} CPU",
        f"{values['coordinator_memory']} memory",
        f"{values['coordinator_disk']} disk",
        f"{values['coordinator_timeout_hours']:g}h deadline",
    )
    return [*items, item("coordinator", "", COORDINATOR_FIELDS, coordinator)]


def relied_defaults(document: SkyRLLaunchConfig) -> list[str]:
    """Every launch setting left to its default (a large launch lists them: `name=value`)."""
    kind, values = document.cluster.execution or "cluster", launch_values(document)
    export = ["skyrl_step.export_hf=False"] if document.run.export_hf_default else []
    return [f"{kind}.{n}={values.get(n)!r}" for n in document.cluster.defaults] + export


def _credentials(document: SkyRLLaunchConfig, composed: Mapping[str, Any]) -> list[ReadinessItem]:
    """The credentials this run needs, by name, and whether each is set here (never the value)."""
    needed = {"WANDB_API_KEY": "trainer.logger is wandb"} if _uses_wandb(composed) else {}
    for name in document.run.credentials:
        needed.setdefault(name, "declared: SkyRLSpec(credentials=...)")
    allowed = (*forwarded_names(), *document.run.credentials)
    items = []
    for name, why in needed.items():
        value = os.environ.get(name)
        forwarded = name in allowed
        state = OK if value and forwarded else MISSING
        told = "set" if value else "set but EMPTY" if value is not None else "NOT set"
        text = f"{name} {told} in the submitting environment"
        if not forwarded:
            text += "; not allow-listed (add it to RLAUNCH_FORWARD_CREDENTIALS)"
        items.append(ReadinessItem("credential", text, why, state))
    if not items:
        items.append(ReadinessItem("credentials", "none needed by this recipe", "trainer.logger, inputs"))
    return items


def _context_budget(document: SkyRLLaunchConfig, facts: StoredFacts, composed: Mapping[str, Any]) -> ReadinessItem:
    prompt = get_path(composed, TRAINER.MAX_PROMPT_LENGTH)
    generate = get_path(composed, SAMPLING.MAX_GENERATE_LENGTH)
    budget = (prompt or 0) + (generate or 0)
    limits, sources = [], []
    context = facts.model.facts.context_length
    if context:
        limits.append(f"model context {context}")
        sources.append(f"{document.inputs.model.identity.split(':', 1)[0]} config.json")
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


def _memory_fit(table: MemoryTable) -> ReadinessItem:
    """Tight or unsized memory is worth a look before a large launch; a certain failure never gets here."""
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


def _checkpoint_policy(document: SkyRLLaunchConfig, composed: Mapping[str, Any]) -> ReadinessItem:
    retention = document.artifacts
    return ReadinessItem(
        "checkpoints",
        f"every {get_path(composed, TRAINER.CKPT_INTERVAL)} step(s), resume_mode "
        f"{get_path(composed, TRAINER.RESUME_MODE)}, keep {retention.resume_checkpoint_count}, "
        f"temporary storage {retention.temporary_storage_ttl_days} day(s)",
        "recipe trainer.ckpt_interval/resume_mode; SkyRLSpec.retention",
    )


def _export_policy(composed: Mapping[str, Any], run: RunSection) -> ReadinessItem:
    interval = get_path(composed, TRAINER.HF_SAVE_INTERVAL)
    cadence = f"every {interval} step(s)" if isinstance(interval, int) and interval > 0 else "no periodic export"
    final = "a Hugging Face export of the final step" if run.export_hf else "no terminal export"
    if run.export_hf_default:
        return ReadinessItem(
            "export",
            f"{final}; {cadence}",
            "skyrl_step(export_hf) not given, its default; recipe trainer.hf_save_interval",
            DEFAULT,
        )
    return ReadinessItem("export", f"{final}; {cadence}", "skyrl_step(export_hf); recipe trainer.hf_save_interval")


def _wandb_identity(document: SkyRLLaunchConfig, composed: Mapping[str, Any]) -> ReadinessItem:
    if not _uses_wandb(composed):
        return ReadinessItem("W&B identity", "not used (trainer.logger is not wandb)", "recipe trainer.logger")
    entity, project = document.cluster.wandb_entity, get_path(composed, TRAINER.PROJECT_NAME)
    value = f"entity {entity or '?'}, project {project or '?'}, run {document.run.artifact or document.run.id}"
    state = OK if entity and project else MISSING
    return ReadinessItem(
        "W&B identity",
        value,
        f"{document.cluster.execution or 'cluster'}.wandb_entity; recipe trainer.project_name; artifact identity",
        state,
    )


def _backend_fixes(profile: RuntimeProfile, composed: Mapping[str, Any], geo: Geometry) -> list[ReadinessItem]:
    source = f"runtime {profile.name} known_defects, lock {profile.lock_file.name}"
    found = findings(profile, composed, geo)
    if not found:
        return [ReadinessItem("backend fixes", f"no upstream defects listed for runtime {profile.name}", source)]

    def state(status: str, triggered: bool) -> str:
        if status == OPEN:
            return MISSING if triggered else WARN
        return WARN if status == UNVERIFIED else OK

    return [ReadinessItem("backend fix", f.line(), source, state(f.status, f.triggered)) for f in found]


def _uses_wandb(composed: Mapping[str, Any]) -> bool:
    logger = get_path(composed, TRAINER.LOGGER)
    return logger == "wandb" or (isinstance(logger, (list, tuple)) and "wandb" in logger)
