"""The SkyRL recipe (`config_yaml`) and how the role plan is rendered into it.

The recipe is written on upstream SkyRL 0.4.0 key paths, plus one rlaunch key: `entrypoint`
(`standard` by default, or `fully_async`). Every geometry and batch key is rendered from the role
plan; the recipe may repeat one only with the identical typed value. Keys rlaunch owns (paths,
seed, retention) are injected by the launch host and may not appear in the recipe.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from rlaunch.launch_config.geometry import FULLY_ASYNC
from rlaunch.launch_config.recipe import get_path, has_path, set_path
from rlaunch.runtimes.registry import RuntimeProfile
from rlaunch.skyrl.errors import PreflightError
from rlaunch.skyrl.role_plan import SkyRLRolePlan

ENTRYPOINT_KEY = "entrypoint"
DEFAULT_ENTRYPOINT = "standard"
# SkyRL's fully-async trainer asserts this flag; it follows the entrypoint, so rlaunch renders it.
FULLY_ASYNC_ENABLED_KEY = "trainer.fully_async.enabled"

PLAN_KEYS: dict[str, Callable[[SkyRLRolePlan], Any]] = {
    "trainer.placement.colocate_all": lambda p: p.colocate_all,
    "trainer.placement.colocate_policy_ref": lambda p: True,
    "trainer.placement.policy_num_nodes": lambda p: p.policy_num_nodes,
    "trainer.placement.policy_num_gpus_per_node": lambda p: p.policy_num_gpus_per_node,
    "trainer.placement.ref_num_nodes": lambda p: p.policy_num_nodes,
    "trainer.placement.ref_num_gpus_per_node": lambda p: p.policy_num_gpus_per_node,
    "generator.inference_engine.num_engines": lambda p: p.num_inference_engines,
    "generator.inference_engine.tensor_parallel_size": lambda p: p.inference_engine_tensor_parallel_size,
    "generator.inference_engine.pipeline_parallel_size": lambda p: p.inference_engine_pipeline_parallel_size,
    "generator.inference_engine.data_parallel_size": lambda p: p.inference_engine_data_parallel_size,
    "generator.inference_engine.expert_parallel_size": lambda p: p.inference_engine_expert_parallel_size,
    "generator.inference_engine.run_engines_locally": lambda p: True,
    "trainer.train_batch_size": lambda p: p.train_batch_size,
    "trainer.policy_mini_batch_size": lambda p: p.policy_mini_batch_size,
    "trainer.micro_train_batch_size_per_gpu": lambda p: p.micro_train_batch_size_per_gpu,
    "generator.n_samples_per_prompt": lambda p: p.n_samples_per_prompt,
}

# Injected by the launch host from the launch document; a recipe setting them would point a run
# at ambient paths or fork the seed and retention away from the spec.
LAUNCHER_OWNED: dict[str, str] = {
    "trainer.ckpt_path": "the RL artifact's checkpoint root",
    "trainer.export_path": "the RL artifact's export root",
    "trainer.resume_path": "the checkpoint root (resume_mode: latest)",
    "trainer.max_ckpts_to_keep": "SkyRLRetentionPolicy.resume_checkpoint_count",
    "trainer.run_name": "the RL artifact's name and version",
    "trainer.log_path": "the attempt directory",
    "trainer.export_hf_artifact": "skyrl_step(export_hf=...)",
    "trainer.policy.model.path": "SkyRLSpec.model (an artifact dependency)",
    "trainer.ref.model.path": "SkyRLSpec.model (an artifact dependency)",
    "data.train_data": "SkyRLSpec.train_data (artifact dependencies)",
    "data.val_data": "SkyRLSpec.validation_data (artifact dependencies)",
}


def parse_config_yaml(text: str) -> dict[str, Any]:
    """The recipe mapping, or a PreflightError saying why the YAML is not one."""
    if not isinstance(text, str):
        raise PreflightError(
            "recipe.not_text",
            ["config_yaml"],
            f"config_yaml must be YAML text, got {type(text).__name__}",
            "pass the recipe as a YAML string",
        )
    import yaml  # here, not at module level: the preflight of a parsed recipe needs no YAML

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise PreflightError(
            "recipe.invalid_yaml", ["config_yaml"], f"config_yaml is not valid YAML: {exc}", "fix the YAML syntax"
        ) from exc
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


def plan_disagreements(recipe: Mapping[str, Any], plan: SkyRLRolePlan, seed: int | None) -> list[PreflightError]:
    """Recipe keys that repeat a role-plan (or seed) value with anything but the identical typed value."""
    expected = {key: value(plan) for key, value in PLAN_KEYS.items()}
    if seed is not None:
        expected["trainer.seed"] = seed
    out = []
    for key, want in expected.items():
        if not has_path(recipe, key):
            continue
        got = get_path(recipe, key)
        if type(got) is not type(want) or got != want:
            source = "SkyRLSpec.seed" if key == "trainer.seed" else "the role plan"
            out.append(
                PreflightError(
                    "recipe.disagrees_with_plan",
                    [f"config_yaml.{key}"],
                    f"SkyRL config {key}={got!r} disagrees with {source} value {want!r}",
                    f"remove {key} from config_yaml (it is rendered from {source}) or make it exactly {want!r}",
                    {"recipe": got, "plan": want},
                )
            )
    return out


def launcher_owned(recipe: Mapping[str, Any]) -> list[PreflightError]:
    return [
        PreflightError(
            "recipe.launcher_owned",
            [f"config_yaml.{key}"],
            f"{key} is set by rlaunch from {source}",
            f"remove {key} from config_yaml",
            {"recipe": get_path(recipe, key)},
        )
        for key, source in LAUNCHER_OWNED.items()
        if has_path(recipe, key)
    ]


def render_recipe(recipe: Mapping[str, Any], plan: SkyRLRolePlan, profile: RuntimeProfile, seed: int) -> dict[str, Any]:
    """The recipe with every role-plan value, the strategy and the seed rendered explicitly."""
    rendered = copy.deepcopy(dict(recipe))
    entrypoint = rendered.pop(ENTRYPOINT_KEY, DEFAULT_ENTRYPOINT)
    for key, value in PLAN_KEYS.items():
        set_path(rendered, key, value(plan))
    strategy = get_path(rendered, "trainer.strategy", None)
    set_path(
        rendered,
        "trainer.strategy",
        profile.canonical_strategy(strategy) if isinstance(strategy, str) else profile.strategy,
    )
    if not has_path(rendered, "trainer.micro_forward_batch_size_per_gpu"):
        set_path(rendered, "trainer.micro_forward_batch_size_per_gpu", plan.micro_train_batch_size_per_gpu)
    set_path(rendered, "trainer.seed", seed)
    if entrypoint == FULLY_ASYNC:
        set_path(rendered, FULLY_ASYNC_ENABLED_KEY, True)
    return rendered
