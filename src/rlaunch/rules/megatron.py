"""Megatron settings SkyRL 0.4.0 refuses in each role beyond its parallel sizes: MoE routing replay
and FP8 recipes, for the policy AND the reference, built or not (`validate_megatron_cfg` checks
both roles always).

The FP8 fields a role states at the top of its `megatron_config` fold into its
`transformer_config_kwargs` unless those name the key themselves (SkyRL's `MegatronConfig`), so a
setting is read the way SkyRL reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.recipe_keys import ENGINE, ROLE, TRAINER, role_key
from rlaunch.rules.subject import Violation, violation

CODES = ("strategy.megatron_routing_replay", "strategy.megatron_fp8")

ROLES = ("policy", "ref")
FP8_OFF = frozenset({"", "0", "false", "none", "null", "no", "off"})
ROUTED_EXPERTS = ENGINE.ENABLE_RETURN_ROUTED_EXPERTS


def megatron_rules(composed: Mapping[str, Any]) -> list[Violation]:
    out = _routed_experts(composed)
    if get_path(composed, TRAINER.STRATEGY) != "megatron":
        return out
    for role in ROLES:
        out += _routing_replay(composed, role) + _fp8(composed, role)
    return out


def _routed_experts(composed: Mapping[str, Any]) -> list[Violation]:
    """The engines return the experts they routed to only for Megatron's replay, over the mp executor
    (SkyRL's `validate_inference_engine_cfg`, whatever the strategy)."""
    if not get_path(composed, ROUTED_EXPERTS, False):
        return []
    needs = {
        ENGINE.DISTRIBUTED_EXECUTOR_BACKEND: "mp",
        TRAINER.STRATEGY: "megatron",
        role_key("policy", ROLE.MEGATRON_ROUTING_REPLAY): True,
    }
    found = {key: get_path(composed, key, None) for key in needs}
    wrong = [key for key, want in needs.items() if found[key] != want]
    if not wrong:
        return []
    return [
        _replay(
            ROUTED_EXPERTS,
            f"{ROUTED_EXPERTS} (rollout router replay) needs " + ", ".join(f"{k}={needs[k]!r}" for k in wrong),
            "set " + " and ".join(f"{k}: {needs[k]!r}" for k in wrong) + f", or {ROUTED_EXPERTS}: false",
            **{key.rsplit(".", 1)[1]: found[key] for key in wrong},
        )
    ]


def _routing_replay(composed: Mapping[str, Any], role: str) -> list[Violation]:
    base = role_key(role, ROLE.MEGATRON_CONFIG)
    if not get_path(composed, role_key(role, ROLE.MEGATRON_ROUTING_REPLAY), False):
        return []
    kwargs = get_path(composed, role_key(role, ROLE.MEGATRON_TRANSFORMER_CONFIG_KWARGS), None) or {}
    out = []
    if kwargs.get("moe_router_fusion"):
        out.append(
            _replay(
                f"{base}.transformer_config_kwargs.moe_router_fusion",
                f"{base}.moe_enable_routing_replay is incompatible with moe_router_fusion: the fused router "
                "bypasses the replayed experts",
                f"set {base}.transformer_config_kwargs.moe_router_fusion: false",
                moe_router_fusion=kwargs["moe_router_fusion"],
            )
        )
    vpp = kwargs.get("virtual_pipeline_model_parallel_size")
    if vpp is not None and vpp > 1:
        out.append(
            _replay(
                f"{base}.transformer_config_kwargs.virtual_pipeline_model_parallel_size",
                f"{base}.moe_enable_routing_replay is incompatible with virtual_pipeline_model_parallel_size={vpp}: "
                "interleaved chunks desynchronise the replay",
                f"remove {base}.transformer_config_kwargs.virtual_pipeline_model_parallel_size",
                virtual_pipeline_model_parallel_size=vpp,
            )
        )
    if role == "policy" and not get_path(composed, ROUTED_EXPERTS, False):
        out.append(
            _replay(
                ROUTED_EXPERTS,
                f"{base}.moe_enable_routing_replay replays the experts the rollout chose, which the engines return "
                f"only with {ROUTED_EXPERTS}: true",
                f"set {ROUTED_EXPERTS}: true (with distributed_executor_backend: mp)",
                enable_return_routed_experts=get_path(composed, ROUTED_EXPERTS, None),
            )
        )
    return out


def _replay(key: str, message: str, fix: str, **values: Any) -> Violation:
    return violation("strategy.megatron_routing_replay", [f"config_yaml.{key}"], message, fix, **values)


def _fp8(composed: Mapping[str, Any], role: str) -> list[Violation]:
    """mxfp8 with persistent FP8 parameters (SkyRL's `validate_concrete_fp8_recipe`, on any device),
    and the policy's persistent FP8 parameters without FP8 parameter gathering."""
    base = role_key(role, ROLE.MEGATRON_CONFIG)
    recipe, param = _fp8_setting(composed, role, "fp8_recipe"), _fp8_setting(composed, role, "fp8_param")
    out = []
    if isinstance(recipe, str) and recipe.strip().lower() == "mxfp8" and _enabled(param):
        out.append(
            violation(
                "strategy.megatron_fp8",
                [f"config_yaml.{base}.fp8_param", f"config_yaml.{base}.fp8_recipe"],
                f"{role} fp8_param={param!r} is not supported with fp8_recipe=mxfp8 (Transformer Engine cannot "
                "re-point MXFP8 parameter storage)",
                f"set {base}.fp8_param: false, or another fp8_recipe",
                fp8_param=param,
                fp8_recipe=recipe,
            )
        )
    elif (
        role == "policy"
        and _enabled(param)
        and not get_path(composed, role_key("policy", ROLE.INFERENCE_ONLY_INIT), False)
        and not get_path(composed, role_key(role, ROLE.MEGATRON_FP8_PARAM_GATHER), False)
    ):
        out.append(
            violation(
                "strategy.megatron_fp8",
                [f"config_yaml.{base}.ddp_config.fp8_param_gather"],
                f"persistent policy fp8_param={param!r} training needs {base}.ddp_config.fp8_param_gather: true",
                f"set {base}.ddp_config.fp8_param_gather: true, or fp8_param: false",
                fp8_param=param,
            )
        )
    return out


def _fp8_setting(composed: Mapping[str, Any], role: str, key: str) -> Any:
    kwargs = get_path(composed, role_key(role, ROLE.MEGATRON_TRANSFORMER_CONFIG_KWARGS), None) or {}
    return kwargs[key] if key in kwargs else get_path(composed, role_key(role, f"{ROLE.MEGATRON_CONFIG}.{key}"), None)


def _enabled(value: Any) -> bool:
    """SkyRL's `is_fp8_enabled`: a string is on unless it spells off; anything else by truth."""
    return value.strip().lower() not in FP8_OFF if isinstance(value, str) else bool(value)
