"""The preflight: every deterministic mistake in a role plan and recipe, before submission.

`check_plan` is pure (no I/O) and returns every violation it finds. It covers the launcher's own
topology arithmetic (exact GPU budget, engines that never straddle a node, colocated slices),
everything upstream SkyRL's `validate_cfg` would refuse only after GPUs are allocated (batch
divisibility per data-parallel rank, the reference-model lcm rule, Megatron and Ulysses
divisibility, fully-async rules), the tail-trim stride that empties the first batch (SkyRL
#1609), the runtime's capabilities, and the explicitness a reviewer expects (token budget,
checkpoint and resume policy, W&B identity).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlaunch.launch_config.geometry import Geometry
from rlaunch.launch_config.recipe import RecipeProblem
from rlaunch.runtimes.registry import RuntimeProfile, get_profile
from rlaunch.skyrl.errors import PreflightError
from rlaunch.skyrl.model_facts import ModelFacts
from rlaunch.skyrl.preflight.batches import batch_rules
from rlaunch.skyrl.preflight.common import violation
from rlaunch.skyrl.preflight.recipe_rules import explicitness, model_rules, recipe_rules, wandb_project
from rlaunch.skyrl.preflight.runtime import entrypoint_rules, runtime_rules
from rlaunch.skyrl.preflight.topology import structure, topology_rules
from rlaunch.skyrl.recipe import launcher_owned, plan_disagreements, render_recipe
from rlaunch.skyrl.role_plan import SkyRLTopology

__all__ = ["check_plan"]


def check_plan(
    topology: SkyRLTopology,
    recipe: Mapping[str, Any],
    profile: str | RuntimeProfile,
    *,
    seed: int | None = None,
    model: ModelFacts | None = None,
) -> list[PreflightError]:
    """Every violation of `topology` + `recipe` (the sparse SkyRL recipe) for `profile`; [] when valid."""
    prof = profile if isinstance(profile, RuntimeProfile) else get_profile(profile)
    plan = topology.role_plan
    out: list[PreflightError] = []
    out += structure(topology)
    out += plan_disagreements(recipe, plan, seed)
    out += launcher_owned(recipe)
    out += explicitness(recipe)
    try:
        rendered = render_recipe(recipe, plan, prof, seed if seed is not None else 0)
    except ValueError as exc:
        # A section the role plan renders into is not a mapping: report it and every other
        # unknown key or type mismatch of the recipe as written, each by its path.
        _, problems = prof.compose(recipe)
        out += [_recipe_problem(p) for p in problems]
        if not problems:
            out.append(
                violation("recipe.not_mapping", ["config_yaml"], str(exc), "make every section of the recipe a mapping")
            )
        return out
    composed, problems = prof.compose(rendered)
    out += [_recipe_problem(p) for p in problems]
    if problems:
        return out  # derived numbers need a well-typed recipe
    geometry = Geometry.from_recipe(composed)
    positive = not structure(topology)
    if positive:
        out += topology_rules(topology)
        out += batch_rules(plan, geometry, composed)
    out += entrypoint_rules(recipe, prof, geometry, composed)
    out += runtime_rules(topology, prof, composed)
    out += recipe_rules(composed)
    out += wandb_project(recipe, composed)
    if positive:
        out += model_rules(model, plan, composed)
    return out


def _recipe_problem(p: RecipeProblem) -> PreflightError:
    return PreflightError(p.code, [f"config_yaml.{p.path}"], p.message, p.fix, {"value": p.value})
