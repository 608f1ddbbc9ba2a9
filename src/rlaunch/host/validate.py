"""Validate a launch document at the host with the one rule set: it may have been written by hand.

`rlaunch launch --config` applies every rule the preflight applies (`rlaunch.rules`: topology
arithmetic, batches, runtime capabilities, recipe rules) to the document before anything is
submitted, so a hand-written document gets the verdict its experiment would have got. Each
violation keeps its code; its fields are translated to the document's own paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlaunch import rules
from rlaunch.launch_config.geometry import ROLE_PLAN_KEYS, Geometry, plan_values
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.launch_config.typed import DocumentError
from rlaunch.rules.architecture import from_hf_config
from rlaunch.runtimes.registry import RuntimeProfile, UnknownRuntimeError, get_profile
from rlaunch.units import parse_size

# Where the experiment side's fields live in a launch document (longest prefix first).
_DOCUMENT_PATHS = (
    ("config_yaml.entrypoint", "runtime.entrypoint"),
    ("model.tokenizer_revision", "inputs.model.tokenizer_revision"),
    ("execution.wandb_entity", "cluster.wandb_entity"),
    ("config_yaml", "skyrl"),
    ("topology", "cluster.allocation"),
    ("role_plan", "skyrl"),
)


class DocumentRefused(DocumentError):
    """The rules refused a launch document; each violation keeps its code, values and fix."""

    def __init__(self, violations: Sequence[rules.Violation]) -> None:
        self.violations = tuple(violations)
        super().__init__([v.line(document_fields(v)) for v in self.violations], what="launch document")

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {
                "code": v.code,
                "fields": list(document_fields(v)),
                "values": dict(v.values),
                "message": v.message,
                "fix": v.fix,
            }
            for v in self.violations
        ]


def document_fields(v: rules.Violation) -> tuple[str, ...]:
    return tuple(document_path(f) for f in v.fields)


def document_path(field: str) -> str:
    """The launch-document path of a rule's field (`role_plan.train_batch_size` -> `skyrl.trainer.train_batch_size`)."""
    head, _, name = field.partition(".")
    if head == "role_plan" and name in ROLE_PLAN_KEYS:
        return f"skyrl.{ROLE_PLAN_KEYS[name]}"
    for prefix, path in _DOCUMENT_PATHS:
        if field == prefix or field.startswith(prefix + "."):
            return path + field[len(prefix) :]
    return field


def _host_memory(memory: str) -> int | None:
    try:
        return parse_size(memory, field="cluster.allocation.memory")
    except ValueError:
        return None  # the schema names a malformed size; the memory rules just cannot size a CPU slot


def document_subject(doc: SkyRLLaunchConfig, profile: RuntimeProfile, composed: dict[str, Any]) -> rules.Subject:
    """What the rules judge in a launch document (its recipe carries the role plan)."""
    model, alloc = doc.inputs.model, doc.cluster.allocation
    return rules.Subject(
        num_nodes=alloc.num_nodes,
        gpus_per_node=alloc.gpus_per_node,
        gpu_variant=alloc.gpu_variant,
        plan=plan_values(composed),
        recipe=doc.skyrl,
        profile=profile,
        entrypoint=doc.runtime.entrypoint,
        seed=doc.run.seed,
        source_digest=doc.runtime.source_digest,
        model=model,
        architecture=from_hf_config(model.hf_config) if model.hf_config else None,
        host_memory_bytes=_host_memory(alloc.memory),
        seed_source="run.seed",
        plan_in_recipe=True,
    )


def document_memory(doc: SkyRLLaunchConfig) -> dict[str, Any]:
    """The per-GPU memory table of a launch document's plan, as plain data (the run record keeps it,
    `rlaunch parity` compares it); `unsized` says why a part could not be sized."""
    from rlaunch.rules import memory

    try:
        profile = get_profile(doc.runtime.profile)
    except UnknownRuntimeError as exc:
        return memory.MemoryTable(None, unsized=(str(exc),)).as_dict()
    composed, problems = profile.compose(doc.skyrl)
    if problems:
        return memory.MemoryTable(None, unsized=("the recipe does not compose",)).as_dict()
    subject = document_subject(doc, profile, composed)
    try:
        geo = Geometry.from_recipe(composed)
        return memory.table_for(subject, geo, composed).as_dict()
    except (ArithmeticError, KeyError, TypeError, ValueError) as exc:  # a refused document's sizes
        return memory.MemoryTable(None, unsized=(f"cannot size this plan: {type(exc).__name__}: {exc}",)).as_dict()


def validate_document(doc: SkyRLLaunchConfig) -> dict[str, Any]:
    """Every violation of a launch document at once (DocumentRefused), before anything is submitted;
    returns the document's recipe composed onto its runtime's base config."""
    try:
        profile = get_profile(doc.runtime.profile)
    except UnknownRuntimeError as exc:
        raise DocumentError([f"runtime.profile: {exc}"]) from None
    composed, _ = profile.compose(doc.skyrl)
    subject = document_subject(doc, profile, composed)
    violations = rules.check(subject, doc.skyrl)
    violations += rules.wandb_entity(composed, doc.cluster.wandb_entity, "cluster.wandb_entity in the document")
    if violations:
        raise DocumentRefused(violations)
    return composed
