"""The one rule set over a composed launch document, applied by the preflight AND the launch host.

A rule reads a `Subject` (allocation, role plan, the recipe as written, runtime profile,
entrypoint, seed, model facts) and the composed recipe through the one `Geometry`, and returns
`Violation`s: a stable code, field paths, the values and the fix. The experiment side raises them
as `PreflightError` before anything is built; `rlaunch launch --config` refuses a document with
the same codes before anything is submitted, so a hand-written document gets the same verdict.
Every rule is pure and bounded: sizes above `MAX_SIZE` and non-positive sizes are violations, so
no input makes a rule divide by zero or run long.

`CODES` lists every code a rule can return; tests hold a launch document for each.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rlaunch.launch_config.composition import RecipeProblem
from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules import batches, data_rules, defect_triggers, megatron, recipe_rules, roles, runtime_rules, topology
from rlaunch.rules.recipe_rules import recipe_problem, wandb_entity
from rlaunch.rules.subject import MAX_SIZE, Subject, Violation, divisor_hint, divisors, violation

__all__ = [
    "CODES",
    "MAX_SIZE",
    "Subject",
    "Violation",
    "check",
    "check_written",
    "recipe_problem",
    "divisor_hint",
    "divisors",
    "violation",
    "wandb_entity",
]

# The memory rules' codes (`rlaunch.rules.memory.CODES`, which a test holds equal): the memory model
# loads only for a subject that carries a model architecture, so a cold verdict never imports it.
MEMORY_CODES = ("memory.model_states", "memory.engine_weights", "memory.kv_one_sequence")
CODES: tuple[str, ...] = tuple(
    dict.fromkeys(
        topology.CODES
        + batches.CODES
        + megatron.CODES
        + runtime_rules.CODES
        + recipe_rules.CODES
        + roles.CODES
        + defect_triggers.CODES
        + MEMORY_CODES
    )
)
TOO_LARGE = frozenset({"topology.too_large", "role_plan.too_large"})
STRUCTURE = TOO_LARGE | {"topology.non_positive", "role_plan.non_positive"}


def check(
    s: Subject,
    rendered: Mapping[str, Any],
    composition: tuple[dict[str, Any], Sequence[RecipeProblem], Geometry | None] | None = None,
) -> list[Violation]:
    """Every violation of `s`, whose recipe with the role plan rendered in is `rendered`; [] when valid.
    `composition`: `rendered` already composed on the profile, its problems and its geometry (a
    `PlannedLaunch`'s: derived once), else composed here.

    Derived numbers need sizes that are positive and bounded, and a recipe that composes onto
    the runtime's base config.
    """
    out = check_written(s)
    if any(v.code in TOO_LARGE for v in out):
        return out
    composed, problems, geometry = composition or (*s.profile.compose(rendered), None)
    if problems:
        return out + [recipe_problem(p) for p in problems]
    sound = not any(v.code in STRUCTURE for v in out)
    return out + composed_rules(s, composed, sound=sound, geometry=geometry)


def check_written(s: Subject) -> list[Violation]:
    """The rules over what was written, before anything is derived from it.

    A size beyond MAX_SIZE is a typo: it is reported alone, since nothing derived from it (or
    printed of it) means anything.
    """
    structure = topology.structure(s)
    if any(v.code in TOO_LARGE for v in structure):
        return structure
    return (
        structure
        + topology.gpu_variant(s)
        + runtime_rules.source_digest(s)
        + recipe_rules.plan_disagreements(s)
        + recipe_rules.launcher_owned(s)
        + recipe_rules.explicitness(s)
        + data_rules.data_rules(s)
    )


def composed_rules(
    s: Subject,
    composed: Mapping[str, Any],
    *,
    sound: bool,
    suggest: bool = True,
    geometry: Geometry | None = None,
) -> list[Violation]:
    """The rules over the composed recipe and its `geometry` (derived here when not given); `sound`:
    every size is positive and bounded; `suggest`: a memory refusal names the nearest plans that fit
    (`rlaunch.rules.fit`, which judges each with these rules, not suggesting again)."""
    geo = geometry or Geometry.from_recipe(composed)
    out = []
    if sound:
        out += topology.topology_rules(s, geo)
        out += batches.batch_rules(geo, composed)
        out += defect_triggers.defect_rules(s.profile, composed, geo)
    out += runtime_rules.entrypoint_rules(s, geo, composed)
    out += runtime_rules.runtime_rules(s, composed)
    out += recipe_rules.recipe_rules(composed)
    out += roles.role_rules(geo, composed)
    out += roles.critic_rules(s, geo) if sound else []
    out += megatron.megatron_rules(composed)
    out += recipe_rules.wandb_project(s, composed)
    if sound:
        out += recipe_rules.model_rules(s, composed, geo)
        if s.architecture is not None:
            from rlaunch.rules import memory

            found = memory.memory_rules(s, geo, composed)
            out += with_nearest_fits(found, s, composed) if found and suggest else found
    return out


def fit_rules(s: Subject, composed: Mapping[str, Any]) -> list[Violation]:
    """What a plan the fit search offers must not break anew: every rule, the sizes sound, no plans
    that fit suggested again (`rlaunch.rules.fit`)."""
    return composed_rules(s, composed, sound=True, suggest=False)


def with_nearest_fits(found: list[Violation], s: Subject, composed: Mapping[str, Any]) -> list[Violation]:
    """`found` (memory refusals) with the nearest plans that fit added to the first one's fix."""
    from rlaunch.rules import fit

    nearest = fit.nearest_fits(s, composed, fit_rules)
    if not nearest:
        return found
    first = found[0]
    listed = "; ".join(f"({i}) {f.line()}" for i, f in enumerate(nearest, 1))
    values = {**first.values, "nearest_fits": [f.line() for f in nearest]}
    return [dataclasses.replace(first, fix=f"{first.fix}. Nearest plans that fit: {listed}", values=values), *found[1:]]
