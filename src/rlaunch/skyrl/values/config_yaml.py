"""The SkyRL recipe (`config_yaml`) and how the role plan is rendered into it.

The recipe is written on upstream SkyRL 0.4.0 key paths, plus one rlaunch key: `entrypoint`
(`standard` by default, or `fully_async`). Every geometry and batch key is rendered from the role
plan; the recipe may repeat one only with the identical typed value. Keys rlaunch owns (paths,
seed, retention) are injected by the launch host and may not appear in the recipe (both rules
live in `rlaunch.rules.recipe_rules`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from rlaunch.launch_config.composition import get_path, has_path, set_path
from rlaunch.launch_config.geometry import FULLY_ASYNC, FULLY_ASYNC_ENABLED_KEY, ROLE_PLAN_KEYS, rendered_plan
from rlaunch.launch_config.recipe_keys import TRAINER
from rlaunch.runtimes.registry import RuntimeProfile
from rlaunch.skyrl.values.preflight_error import PreflightError
from rlaunch.skyrl.values.role_plan import SkyRLRolePlan

ENTRYPOINT_KEY = "entrypoint"
DEFAULT_ENTRYPOINT = "standard"
# Every recipe key the role plan decides, in document order.
PLAN_KEYS: tuple[str, ...] = tuple(rendered_plan({name: 0 for name in ROLE_PLAN_KEYS}))


def parse_config_yaml(text: str) -> dict[str, Any]:
    """The recipe mapping, or a PreflightError saying why the YAML is not one."""
    if not isinstance(text, str):
        raise PreflightError(
            "recipe.not_text",
            ["config_yaml"],
            f"config_yaml must be YAML text, got {type(text).__name__}",
            "pass the recipe as a YAML string",
        )
    # here, not at module level: the preflight of a parsed recipe needs no YAML
    from rlaunch.launch_config.loader import load_yaml
    from rlaunch.launch_config.typed import DocumentError

    try:
        data = load_yaml(text, source="config_yaml", what="recipe")
    except DocumentError as exc:
        (problem,) = exc.problems
        message, _, fix = problem.rpartition("; ")
        raise PreflightError("recipe.invalid_yaml", ["config_yaml"], message, fix) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PreflightError(
            "recipe.not_mapping",
            ["config_yaml"],
            "config_yaml must contain a mapping at the document root",
            "write the recipe as `trainer: ...`, `generator: ...` sections",
        )
    return data


def entrypoint_of(recipe: Mapping[str, Any]) -> Any:
    return recipe.get(ENTRYPOINT_KEY, DEFAULT_ENTRYPOINT)


def render_recipe(recipe: Mapping[str, Any], plan: SkyRLRolePlan, profile: RuntimeProfile, seed: int) -> dict[str, Any]:
    """The recipe with every role-plan value, the strategy and the seed rendered explicitly."""
    rendered = copy.deepcopy(dict(recipe))
    entrypoint = rendered.pop(ENTRYPOINT_KEY, DEFAULT_ENTRYPOINT)
    for key, value in rendered_plan(dataclasses.asdict(plan)).items():
        set_path(rendered, key, value)
    strategy = get_path(rendered, TRAINER.STRATEGY, None)
    set_path(
        rendered,
        TRAINER.STRATEGY,
        profile.canonical_strategy(strategy) if isinstance(strategy, str) else profile.strategy,
    )
    if not has_path(rendered, TRAINER.MICRO_FORWARD_BATCH_SIZE_PER_GPU):
        set_path(rendered, TRAINER.MICRO_FORWARD_BATCH_SIZE_PER_GPU, plan.micro_train_batch_size_per_gpu)
    set_path(rendered, TRAINER.SEED, seed)
    if entrypoint == FULLY_ASYNC:
        set_path(rendered, FULLY_ASYNC_ENABLED_KEY, True)
    return rendered
