"""What the rules judge in a launch document, and the document's per-GPU memory table.

One reading of a document for every reader: the launch host validates it, records its memory
table and `rlaunch parity` prints it; the plan's views read the document the experiment would
launch the same way, so a plan and the run it becomes show the same numbers.
"""

from __future__ import annotations

from typing import Any

from rlaunch.launch_config.geometry import Geometry, plan_values
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.rules import fit, memory
from rlaunch.rules.model_shape import Unsized, from_hf_config
from rlaunch.rules.subject import Subject
from rlaunch.runtimes.registry import RuntimeProfile, UnknownRuntimeError, get_profile
from rlaunch.units import parse_size

SIZING_ERRORS = (ArithmeticError, KeyError, TypeError, ValueError)  # what a refused document's sizes raise


def document_subject(doc: SkyRLLaunchConfig, profile: RuntimeProfile, composed: dict[str, Any]) -> Subject:
    """What the rules judge in a launch document (its recipe carries the role plan)."""
    model, alloc = doc.inputs.model, doc.cluster.allocation
    return Subject(
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
        architecture=from_hf_config(model.hf_config)
        if model.hf_config
        else Unsized("unknown", model.unsized_reason)
        if model.unsized_reason
        else None,
        host_memory_bytes=_host_memory(alloc.memory),
        seed_source="run.seed",
        plan_in_recipe=True,
        reward=doc.code.reward if doc.code is not None else None,
    )


def memory_table(doc: SkyRLLaunchConfig) -> memory.MemoryTable:
    """The per-GPU memory table of a document's plan; `unsized` says why a part could not be sized."""
    try:
        profile = get_profile(doc.runtime.profile)
    except UnknownRuntimeError as exc:
        return memory.MemoryTable(None, unsized=(str(exc),))
    composed, problems = profile.compose(doc.skyrl)
    if problems:
        return memory.MemoryTable(None, unsized=("the recipe does not compose",))
    return composed_memory_table(doc, profile, composed, Geometry.from_recipe(composed))


def nearest_fits(doc: SkyRLLaunchConfig, profile: RuntimeProfile, composed: dict[str, Any]) -> list[fit.FitPlan]:
    """The nearest plans that fit a document whose memory table is refused, over or tight (`rules.fit`),
    from its recipe already composed on `profile`."""
    from rlaunch.rules import fit_rules

    try:
        return fit.nearest_fits(document_subject(doc, profile, composed), composed, fit_rules)
    except SIZING_ERRORS:
        return []


def composed_memory_table(
    doc: SkyRLLaunchConfig, profile: RuntimeProfile, composed: dict[str, Any], geometry: Geometry
) -> memory.MemoryTable:
    """`memory_table` of a document whose recipe is already composed on `profile`, with its geometry
    (both derived once, by `rlaunch.judgement.planned.PlannedLaunch`)."""
    subject = document_subject(doc, profile, composed)
    try:
        return memory.table_for(subject, geometry, composed)
    except SIZING_ERRORS as exc:  # a refused document's sizes
        return memory.MemoryTable(None, unsized=(f"cannot size this plan: {type(exc).__name__}: {exc}",))


def _host_memory(size: str) -> int | None:
    try:
        return parse_size(size)
    except ValueError:
        return None  # the schema names a malformed size; the memory rules just cannot size a CPU slot
