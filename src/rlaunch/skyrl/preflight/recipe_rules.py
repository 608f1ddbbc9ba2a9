"""Recipe rules: what SkyRL's validator refuses inside an allocated job, the explicitness a
reviewer expects, and the model facts (attention heads, context length) when known."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlaunch.launch_config.recipe import get_path, has_path
from rlaunch.skyrl.errors import PreflightError
from rlaunch.skyrl.model_facts import ModelFacts
from rlaunch.skyrl.preflight.common import divisors, violation
from rlaunch.skyrl.role_plan import SkyRLRolePlan

EXPLICIT_KEYS = {
    "trainer.ckpt_interval": ("explicit.checkpoint_interval", "how often a resumable checkpoint is written"),
    "trainer.resume_mode": ("explicit.resume_mode", "whether a relaunch resumes (latest) or starts over (none)"),
    "trainer.hf_save_interval": (
        "explicit.export_policy",
        "the HF export policy during training (-1: terminal export only)",
    ),
    "trainer.max_prompt_length": ("explicit.token_budget", "the request token budget"),
    "generator.sampling_params.max_generate_length": ("explicit.token_budget", "the response token budget"),
}


def recipe_rules(c: Mapping[str, Any]) -> list[PreflightError]:
    g = lambda key: get_path(c, key)  # noqa: E731
    out = []
    if g("trainer.critic.model.path"):
        out.append(
            violation(
                "recipe.critic",
                ["config_yaml.trainer.critic.model.path"],
                "the role plan does not describe a separate critic role",
                "remove trainer.critic.model.path (critic-free estimators such as grpo need none)",
                value=g("trainer.critic.model.path"),
            )
        )
    if g("trainer.algorithm.use_kl_loss") and g("trainer.algorithm.use_kl_in_reward"):
        out.append(
            violation(
                "recipe.kl_exclusive",
                ["config_yaml.trainer.algorithm.use_kl_loss", "config_yaml.trainer.algorithm.use_kl_in_reward"],
                "use_kl_loss and use_kl_in_reward are mutually exclusive",
                "keep one of them true",
                use_kl_loss=True,
                use_kl_in_reward=True,
            )
        )
    if g("trainer.algorithm.advantage_estimator") == "gae":
        out.append(
            violation(
                "recipe.gae_needs_critic",
                ["config_yaml.trainer.algorithm.advantage_estimator"],
                "advantage_estimator 'gae' needs a critic, which the role plan does not describe",
                "use grpo, rloo or reinforce++",
                value="gae",
            )
        )
    steps = g("trainer.max_training_steps")
    if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool) or steps <= 0):
        out.append(
            violation(
                "recipe.max_training_steps",
                ["config_yaml.trainer.max_training_steps"],
                f"trainer.max_training_steps={steps!r} must be a positive integer when set",
                "set it to a positive integer or remove it",
                value=steps,
            )
        )
    if g("trainer.resume_mode") not in ("none", "latest", None):
        out.append(
            violation(
                "recipe.resume_mode",
                ["config_yaml.trainer.resume_mode"],
                f"trainer.resume_mode={g('trainer.resume_mode')!r} is not supported",
                "use latest (resume from the checkpoint root) or none",
                value=g("trainer.resume_mode"),
            )
        )
    prompt, turns, max_input = g("trainer.max_prompt_length"), g("generator.max_turns"), g("generator.max_input_length")
    if max_input is not None and ((turns == 1 and max_input != prompt) or (turns > 1 and max_input < prompt)):
        rel = "equal" if turns == 1 else "be at least"
        out.append(
            violation(
                "recipe.input_length",
                ["config_yaml.generator.max_input_length"],
                f"generator.max_input_length={max_input} must {rel} trainer.max_prompt_length={prompt} with max_turns={turns}",
                "remove generator.max_input_length (it defaults to max_prompt_length)",
                value=max_input,
            )
        )
    engines = g("generator.inference_engine.num_engines")
    if g("generator.inference_engine.enable_pd"):
        prefill = g("generator.inference_engine.num_prefill")
        if engines < 2 or not 0 < prefill < engines:
            out.append(
                violation(
                    "recipe.prefill_decode",
                    ["config_yaml.generator.inference_engine.num_prefill"],
                    f"prefill/decode disaggregation needs num_engines >= 2 and 0 < num_prefill < num_engines; got {prefill} of {engines}",
                    "choose num_prefill between 1 and num_engines-1",
                    num_prefill=prefill,
                    num_engines=engines,
                )
            )
    if g("generator.inference_engine.external_proxy_url") or g("generator.inference_engine.external_server_urls"):
        out.append(
            violation(
                "recipe.external_engines",
                ["config_yaml.generator.inference_engine.external_server_urls"],
                "the role plan describes local engines; external inference servers are not part of it",
                "remove the external URLs",
                value=True,
            )
        )
    if g("generator.inference_engine.distributed_executor_backend") not in ("ray", "mp"):
        out.append(
            violation(
                "recipe.executor_backend",
                ["config_yaml.generator.inference_engine.distributed_executor_backend"],
                f"distributed_executor_backend must be ray or mp; got {g('generator.inference_engine.distributed_executor_backend')!r}",
                "use ray (may span nodes) or mp (one node)",
                value=g("generator.inference_engine.distributed_executor_backend"),
            )
        )
    return out


def wandb_project(recipe: Mapping[str, Any], composed: Mapping[str, Any]) -> list[PreflightError]:
    if get_path(composed, "trainer.logger") != "wandb" or has_path(recipe, "trainer.project_name"):
        return []
    return [
        violation(
            "explicit.wandb_project",
            ["config_yaml.trainer.project_name"],
            "trainer.logger is wandb but config_yaml does not name trainer.project_name",
            "set trainer.project_name explicitly (or use logger: console)",
        )
    ]


def explicitness(recipe: Mapping[str, Any]) -> list[PreflightError]:
    return [
        violation(
            code,
            [f"config_yaml.{key}"],
            f"{key} is not set explicitly; it decides {what}",
            f"set {key} in config_yaml instead of relying on the trainer default",
        )
        for key, (code, what) in EXPLICIT_KEYS.items()
        if not has_path(recipe, key)
    ]


def model_rules(model: ModelFacts | None, p: SkyRLRolePlan, c: Mapping[str, Any]) -> list[PreflightError]:
    if model is None:
        return []
    out = []
    heads, tp = model.num_attention_heads, p.inference_engine_tensor_parallel_size
    if heads and heads % tp:
        out.append(
            violation(
                "model.tp_heads",
                ["role_plan.inference_engine_tensor_parallel_size"],
                f"inference TP={tp} must divide the model's {heads} attention heads",
                f"choose TP among {divisors(heads)}",
                heads=heads,
                tp=tp,
            )
        )
    context = model.context_length
    budget = get_path(c, "trainer.max_prompt_length") + get_path(c, "generator.sampling_params.max_generate_length")
    if context and budget > context:
        out.append(
            violation(
                "model.context_budget",
                ["config_yaml.trainer.max_prompt_length", "config_yaml.generator.sampling_params.max_generate_length"],
                f"max_prompt_length + max_generate_length = {budget} exceeds the model's context length {context}",
                f"shrink the token budget to at most {context}",
                budget=budget,
                context_length=context,
            )
        )
    return out
