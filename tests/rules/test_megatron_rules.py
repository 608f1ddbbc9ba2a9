"""SkyRL's Megatron refusals beyond parallel sizes (`rlaunch.rules.megatron`) on composed configs
written here, sparse ones included: a key a config leaves out reads as off, never as on and never
as an error; the virtual-pipeline boundary (1 is no interleaving); FP8 settings spelled as SkyRL
reads them (strings by their words, in any case and padding; other values by truth), folded from
`transformer_config_kwargs` before the role's own field."""

from __future__ import annotations

from typing import Any

import pytest

from rlaunch.rules.megatron import ROUTED_EXPERTS, megatron_rules


def composed(policy: dict[str, Any] | None = None, ref: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    tree: dict[str, Any] = {"trainer": {"strategy": "megatron"}}
    if policy is not None:
        tree["trainer"]["policy"] = {"megatron_config": policy}
    if ref is not None:
        tree["trainer"]["ref"] = {"megatron_config": ref}
    for dotted, value in top.items():
        node = tree
        *parts, last = dotted.split("__")
        for part in parts:
            node = node.setdefault(part, {})
        node[last] = value
    return tree


def codes(tree: dict[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    return [(v.code, v.fields) for v in megatron_rules(tree)]


def test_a_sparse_config_states_nothing_refused() -> None:
    assert megatron_rules(composed()) == []
    assert megatron_rules({"trainer": {"strategy": "fsdp"}}) == []


REPLAY = "config_yaml.trainer.policy.megatron_config"


def test_routing_replay_without_kwargs_or_returned_experts_names_the_engine_setting() -> None:
    (v,) = megatron_rules(composed({"moe_enable_routing_replay": True}))
    assert v.code == "strategy.megatron_routing_replay"
    assert v.fields == (f"config_yaml.{ROUTED_EXPERTS}",)
    assert dict(v.values) == {"enable_return_routed_experts": None}  # absent, not false
    assert v.fix == f"set {ROUTED_EXPERTS}: true (with distributed_executor_backend: mp)"


def test_the_reference_needs_no_returned_experts_for_its_replay() -> None:
    assert megatron_rules(composed(ref={"moe_enable_routing_replay": True})) == []


@pytest.mark.parametrize(("vpp", "refused"), [(None, False), (1, False), (2, True)])
def test_interleaved_pipeline_chunks_refuse_replay_from_two(vpp: int | None, refused: bool) -> None:
    kwargs = {} if vpp is None else {"virtual_pipeline_model_parallel_size": vpp}
    tree = composed(ref={"moe_enable_routing_replay": True, "transformer_config_kwargs": kwargs})
    found = codes(tree)
    assert found == (
        [
            (
                "strategy.megatron_routing_replay",
                (
                    "config_yaml.trainer.ref.megatron_config."
                    "transformer_config_kwargs.virtual_pipeline_model_parallel_size",
                ),
            )
        ]
        if refused
        else []
    )


def test_replay_with_the_experts_returned_over_mp_is_accepted() -> None:
    tree = composed(
        {"moe_enable_routing_replay": True},
        generator__inference_engine__enable_return_routed_experts=True,
        generator__inference_engine__distributed_executor_backend="mp",
    )
    assert megatron_rules(tree) == []
    tree["generator"]["inference_engine"]["distributed_executor_backend"] = "ray"
    (v,) = megatron_rules(tree)
    assert dict(v.values) == {"distributed_executor_backend": "ray"}


@pytest.mark.parametrize(
    ("param", "enabled"),
    [
        (True, True),
        (False, False),
        (None, False),
        (0, False),
        (1, True),
        ("e4m3", True),
        ("false", False),  # a string by its words, not its truth
        (" OFF ", False),
        ("None", False),
        ("", False),
        ("no", False),
        ("hybrid", True),
    ],
)
def test_persistent_fp8_parameters_with_mxfp8_are_refused_when_on(param: Any, enabled: bool) -> None:
    for where in ("top", "kwargs"):
        config = (
            {"fp8_recipe": " MXFP8", "fp8_param": param}
            if where == "top"
            else {"transformer_config_kwargs": {"fp8_recipe": "mxfp8", "fp8_param": param}}
        )
        found = megatron_rules(composed(ref=config))
        assert [v.code for v in found] == (["strategy.megatron_fp8"] if enabled else []), (where, param)
        if enabled:
            assert found[0].values["fp8_param"] == param


def test_kwargs_override_the_roles_own_fp8_field() -> None:
    tree = composed(ref={"fp8_recipe": "mxfp8", "fp8_param": True, "transformer_config_kwargs": {"fp8_param": False}})
    assert megatron_rules(tree) == []
    tree = composed(
        ref={"fp8_recipe": "delayed", "fp8_param": True, "transformer_config_kwargs": {"fp8_recipe": "mxfp8"}}
    )
    assert [v.code for v in megatron_rules(tree)] == ["strategy.megatron_fp8"]


@pytest.mark.parametrize(
    ("gather", "inference_only", "refused"),
    [(None, None, True), (False, False, True), (True, None, False), (None, True, False)],
)
def test_policy_fp8_parameters_need_fp8_parameter_gathering(gather, inference_only, refused: bool) -> None:
    policy: dict[str, Any] = {"fp8_param": True}
    if gather is not None:
        policy["ddp_config"] = {"fp8_param_gather": gather}
    tree = composed(policy)
    if inference_only is not None:
        tree["trainer"]["policy"]["inference_only_init"] = inference_only
    found = megatron_rules(tree)
    assert [v.fields for v in found] == (
        [("config_yaml.trainer.policy.megatron_config.ddp_config.fp8_param_gather",)] if refused else []
    )
    # the reference holds no optimizer state: it is never asked to gather
    assert megatron_rules(composed(ref={"fp8_param": True})) == []


def test_returned_experts_alone_name_every_setting_they_need() -> None:
    tree = {"trainer": {"strategy": "fsdp"}, "generator": {"inference_engine": {"enable_return_routed_experts": True}}}
    (v,) = megatron_rules(tree)
    assert dict(v.values) == {
        "distributed_executor_backend": None,
        "strategy": "fsdp",
        "moe_enable_routing_replay": None,
    }
