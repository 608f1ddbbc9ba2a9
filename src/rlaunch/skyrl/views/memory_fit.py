"""`memory_report`: the per-GPU memory table of a plan, its certain failures and its warnings.

A view of the rendered launch document's recipe plus the model's facts: it renders and composes
the recipe exactly as `check_plan` does and hands it to the one memory model
(`rlaunch.rules.memory`), whose certain failures `check_plan` also returns when given the model.
Pure: no I/O, no torch or transformers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch import rules
from rlaunch.launch_config.composition import RecipeProblem
from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules import fit, memory
from rlaunch.runtimes.registry import RuntimeProfile, get_profile
from rlaunch.skyrl.preflight import subject_of
from rlaunch.skyrl.values.config_yaml import render_recipe
from rlaunch.skyrl.values.preflight_error import PreflightError
from rlaunch.skyrl.values.role_plan import SkyRLTopology
from rlaunch.sources.model_facts import ModelFacts


@dataclass(frozen=True)
class MemoryReport:
    table: memory.MemoryTable
    violations: tuple[PreflightError, ...] = ()
    warnings: tuple[str, ...] = ()

    def lines(self) -> list[str]:
        """The per-GPU table as the dry run prints it (role x phase: estimate, capacity, headroom)."""
        return render(self.table)


def memory_report(
    topology: SkyRLTopology,
    recipe: Mapping[str, Any],
    profile: str | RuntimeProfile,
    model: ModelFacts,
    *,
    seed: int = 0,
    host_memory_bytes: int | None = None,
) -> MemoryReport:
    """The memory table of `topology` + `recipe` for `profile` and `model` (see the module docstring).

    `host_memory_bytes` (per node) sizes a CPU runtime's slots; GPUs are sized from the device table.
    """
    judged = _judged(topology, recipe, profile, model, seed, host_memory_bytes)
    if judged is None:
        table = memory.MemoryTable(None, unsized=("cannot size: the recipe does not compose (check_plan says why)",))
        return MemoryReport(table, (), tuple(table.warnings()))
    subject, composed = judged
    geo = Geometry.from_recipe(composed)
    table = memory.table_for(subject, geo, composed)
    found = memory.violations(table, subject, geo)
    return MemoryReport(table, tuple(PreflightError.from_violation(v) for v in found), tuple(table.warnings()))


def nearest_fits(
    topology: SkyRLTopology,
    recipe: Mapping[str, Any],
    profile: str | RuntimeProfile,
    model: ModelFacts,
    *,
    seed: int = 0,
    host_memory_bytes: int | None = None,
) -> list[fit.FitPlan]:
    """The nearest plans that fit `topology` + `recipe` when its memory table is refused, over or
    tight (`rlaunch.rules.fit`; with `host_memory_bytes` per node, none offloading more than it
    holds); [] when it fits, cannot be sized or does not compose."""
    judged = _judged(topology, recipe, profile, model, seed, host_memory_bytes)
    if judged is None:
        return []
    return fit.nearest_fits(*judged, lambda s, c: rules.composed_rules(s, c, sound=True, suggest=False))


def _judged(
    topology: SkyRLTopology,
    recipe: Mapping[str, Any],
    profile: str | RuntimeProfile,
    model: ModelFacts,
    seed: int,
    host_memory_bytes: int | None,
) -> tuple[rules.Subject, dict[str, Any]] | None:
    """What the rules judge and the composed recipe, as `check_plan` renders them; None if it does not compose."""
    prof = profile if isinstance(profile, RuntimeProfile) else get_profile(profile)
    subject = dataclasses.replace(subject_of(topology, recipe, prof, seed, model), host_memory_bytes=host_memory_bytes)
    problems: list[RecipeProblem] | list[str]
    try:
        composed, problems = prof.compose(render_recipe(recipe, topology.role_plan, prof, seed))
    except ValueError as exc:
        problems = [str(exc)]
    return None if problems else (subject, composed)


def render(table: memory.MemoryTable) -> list[str]:
    if table.device is None:
        return [f"  {reason}" for reason in table.unsized]
    head = f"  {'role':<10} {'phase':<19} {'estimate':>9} {'capacity':>9} {'headroom':>9}  status"
    lines = [f"  per device: {table.device.name}, {memory.gib(table.device.bytes)} GiB ({table.device.source})", head]
    for r in table.rows:
        lines.append(
            f"  {r.role:<10} {r.phase:<19} {memory.gib(r.estimate):>9.2f} {memory.gib(r.capacity):>9.2f} "
            f"{memory.gib(r.headroom):>9.2f}  {r.status}"
        )
        lines.append(f"    {r.detail}")
    if table.kv is not None:
        kv = table.kv
        lines.append(
            f"  rollout KV cache ~{kv.tokens} tokens per engine replica: ~{kv.sequences:.1f} sequences of "
            f"{kv.max_model_len} tokens at once ({kv.bytes_per_token} B/token per device)"
        )
    return lines


def render_nearest_fits(found: list[fit.FitPlan]) -> list[str]:
    """The plan's "what would fit" section: each nearest plan as the changes to paste into the spec."""
    if not found:
        return []
    head = "what would fit (nearest plans from the same memory model; paste the changes into the spec):"
    return [head, *(f"  {f.line()}" for f in found)]
