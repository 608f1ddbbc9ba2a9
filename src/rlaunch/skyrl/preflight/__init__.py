"""The preflight: every deterministic mistake in a role plan and recipe, before submission.

`check_plan` is pure (no I/O) and bounded, and returns every violation it finds. The rules live
once, in `rlaunch.rules`, which the launch host applies to a launch document too: the launcher's
own topology arithmetic (exact GPU budget, engines that never straddle a node, colocated slices),
everything upstream SkyRL's `validate_cfg` would refuse only after GPUs are allocated (batch
divisibility per data-parallel rank, the reference-model lcm rule, Megatron and Ulysses
divisibility, fully-async rules), the tail-trim stride that empties the first batch (SkyRL
#1609), the runtime's capabilities, and the explicitness a reviewer expects (token budget,
checkpoint and resume policy, W&B identity), and, given the model's architecture, the certain
memory failures (`rlaunch.rules.memory`). Here they are raised as `PreflightError`s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from rlaunch import rules
from rlaunch.launch_config.composition import RecipeProblem
from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules.data_rules import DataFacts
from rlaunch.runtimes.registry import RuntimeProfile, get_profile
from rlaunch.skyrl.values.config_yaml import entrypoint_of, render_recipe
from rlaunch.skyrl.values.preflight_error import PreflightError
from rlaunch.skyrl.values.role_plan import SkyRLTopology
from rlaunch.sources.model_facts import ModelFacts

__all__ = ["check_plan", "subject_of"]


def check_plan(
    topology: SkyRLTopology,
    recipe: Mapping[str, Any],
    profile: str | RuntimeProfile,
    *,
    seed: int | None = None,
    model: ModelFacts | None = None,
    data: Sequence[DataFacts] = (),
    composition: tuple[dict[str, Any], Sequence[RecipeProblem], Geometry | None] | None = None,
    host_memory_bytes: int | None = None,
) -> list[PreflightError]:
    """Every violation of `topology` + `recipe` (the sparse SkyRL recipe) for `profile`; [] when valid.
    `composition`: the rendered recipe already composed, its problems and geometry (`rules.check`);
    `host_memory_bytes`: a node's host memory, when known (`rlaunch fit --host-memory`): the plans
    that fit offered with a memory refusal offload no more than it holds."""
    prof = profile if isinstance(profile, RuntimeProfile) else get_profile(profile)
    plan = topology.role_plan
    subject = dataclasses.replace(
        subject_of(topology, recipe, prof, seed, model, data), host_memory_bytes=host_memory_bytes
    )
    try:
        rendered = render_recipe(recipe, plan, prof, seed if seed is not None else 0)
    except ValueError as exc:
        return [PreflightError.from_violation(v) for v in _unrenderable(subject, exc)]
    return [PreflightError.from_violation(v) for v in rules.check(subject, rendered, composition)]


def subject_of(
    topology: SkyRLTopology,
    recipe: Mapping[str, Any],
    profile: RuntimeProfile,
    seed: int | None,
    model: ModelFacts | None,
    data: Sequence[DataFacts] = (),
) -> rules.Subject:
    """What the rules judge, for a spec's topology, sparse recipe, profile, seed, model and data facts."""
    return rules.Subject(
        num_nodes=topology.num_nodes,
        gpus_per_node=topology.gpus_per_node,
        gpu_variant=topology.gpu_variant,
        plan=dataclasses.asdict(topology.role_plan),
        recipe=recipe,
        profile=profile,
        entrypoint=entrypoint_of(recipe),
        seed=seed,
        model=model,
        architecture=model.architecture if model else None,
        data=tuple(data),
    )


def _unrenderable(subject: rules.Subject, exc: ValueError) -> list[rules.Violation]:
    """A section the role plan renders into is not a mapping: every problem of the recipe as written."""
    out = rules.check_written(subject)
    _, problems = subject.profile.compose(subject.recipe)
    if problems:
        return out + [rules.recipe_problem(p) for p in problems]
    return out + [
        rules.violation("recipe.not_mapping", ["config_yaml"], str(exc), "make every section of the recipe a mapping")
    ]
