"""The entrypoint, the runtime profile's strategy, and what each runtime can honour."""

from __future__ import annotations

from typing import Any

import pytest

from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl import check_plan
from rlaunch.skyrl.values.config_yaml import render_recipe
from tests.support.specs import (
    BASE_RECIPE,
    WANDB_RECIPE,
    assert_useful,
    codes,
    cpu_plan,
    cpu_topology,
    only,
    plan,
    recipe,
    seed_topology,
    topology,
    violations,
)

FULLY_ASYNC_OK = recipe(
    entrypoint="fully_async",
    trainer={"algorithm": {"policy_loss_type": "rollout_is"}, "fully_async": {"num_parallel_generation_workers": 128}},
)


# --- entrypoint -----------------------------------------------------------------------------------


def test_fully_async_passes_with_disaggregated_roles_and_train_equal_mini() -> None:
    assert violations(seed_topology(train_batch_size=64), FULLY_ASYNC_OK) == []


def test_fully_async_requires_train_equal_mini() -> None:
    v = only(violations(seed_topology(), FULLY_ASYNC_OK), "entrypoint.fully_async_batch")
    assert v.fields == ("role_plan.train_batch_size", "role_plan.policy_mini_batch_size")
    assert_useful(v, "train_batch_size == policy_mini_batch_size; got 256 and 64")


def test_fully_async_requires_disaggregated_roles() -> None:
    found = violations(
        topology(plan(train_batch_size=32)),
        recipe(
            entrypoint="fully_async",
            trainer={
                "algorithm": {"policy_loss_type": "rollout_is"},
                "fully_async": {"num_parallel_generation_workers": 64},
            },
        ),
    )
    assert codes(found) == ["entrypoint.fully_async_colocated"]
    assert found[0].fields == ("role_plan.colocate_all",)
    assert_useful(found[0], "disaggregated", "colocate_all is true")


@pytest.mark.parametrize(
    ("trainer", "code", "field", "words", "fix"),
    [
        # mini 64, staleness 4: workers must lie in [64, 320]; the trainer default 768 does not.
        (
            {"algorithm": {"policy_loss_type": "rollout_is"}},
            "entrypoint.fully_async_workers",
            "config_yaml.trainer.fully_async.num_parallel_generation_workers",
            "64 <= 768 <= 320",
            "between 64 and 320",
        ),
        (
            {"fully_async": {"num_parallel_generation_workers": 128}},
            "entrypoint.fully_async_policy_loss",
            "config_yaml.trainer.algorithm.policy_loss_type",
            "'regular'",
            "rollout_is",
        ),
    ],
    ids=["generation-workers-window", "a-rollout-logprob-policy-loss"],
)
def test_fully_async_needs_its_workers_window_and_a_rollout_logprob_policy_loss(
    trainer: dict[str, Any], code: str, field: str, words: str, fix: str
) -> None:
    tree = recipe(entrypoint="fully_async", trainer=trainer)
    v = only(violations(seed_topology(train_batch_size=64), tree), code)
    assert v.fields == (field,)
    assert_useful(v, words)
    assert fix in v.fix


def test_fully_async_needs_unbatched_generation() -> None:
    v = only(
        violations(
            seed_topology(train_batch_size=64),
            recipe(**{**FULLY_ASYNC_OK, "generator": {**FULLY_ASYNC_OK["generator"], "batched": True}}),
        ),
        "entrypoint.fully_async_batched",
    )
    assert v.fields == ("config_yaml.generator.batched",)


def test_fully_async_enabled_flag_follows_the_entrypoint() -> None:
    rendered = render_recipe(FULLY_ASYNC_OK, seed_topology(train_batch_size=64).role_plan, get_profile("fsdp"), 0)
    assert rendered["trainer"]["fully_async"]["enabled"] is True
    assert "entrypoint" not in rendered
    standard = render_recipe(BASE_RECIPE, seed_topology().role_plan, get_profile("fsdp"), 0)
    assert "fully_async" not in standard["trainer"]
    off = recipe(
        **{
            **FULLY_ASYNC_OK,
            "trainer": {
                **FULLY_ASYNC_OK["trainer"],
                "fully_async": {"enabled": False, "num_parallel_generation_workers": 128},
            },
        }
    )
    v = only(violations(seed_topology(train_batch_size=64), off), "entrypoint.fully_async_enabled")
    assert v.fields == ("config_yaml.trainer.fully_async.enabled",)
    on = recipe(trainer={"fully_async": {"enabled": True}})
    assert codes(violations(seed_topology(), on)) == ["entrypoint.fully_async_enabled"]


def test_unknown_entrypoint_is_refused_listing_the_registered_ones() -> None:
    v = only(violations(topology(), recipe(entrypoint="turbo")), "entrypoint.unknown")
    assert v.fields == ("config_yaml.entrypoint",)
    assert_useful(v, "'turbo'", "'fsdp'")
    assert "['fully_async', 'standard']" in v.fix
    cpu = only(violations(cpu_topology(), recipe(entrypoint="fully_async"), profile="trl-cpu"), "entrypoint.unknown")
    assert "['standard']" in cpu.fix


# --- runtime profile vs trainer.strategy ----------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "written", "rendered"),
    [
        ("fsdp", None, "fsdp"),
        ("fsdp", "fsdp", "fsdp"),
        ("fsdp", "fsdp2", "fsdp"),
        ("megatron", None, "megatron"),
        ("megatron", "megatron", "megatron"),
    ],
)
def test_strategy_matching_the_profile_is_accepted_and_rendered(
    profile: str, written: str | None, rendered: str
) -> None:
    tree = recipe(trainer={"strategy": written}) if written else BASE_RECIPE
    assert violations(topology(), tree, profile=profile) == []
    assert render_recipe(tree, plan(), get_profile(profile), 0)["trainer"]["strategy"] == rendered


@pytest.mark.parametrize(("profile", "written"), [("fsdp", "megatron"), ("megatron", "fsdp"), ("megatron", "fsdp2")])
def test_strategy_contradicting_the_profile_is_refused(profile: str, written: str) -> None:
    v = only(
        violations(topology(), recipe(trainer={"strategy": written}), profile=profile), "runtime.strategy_mismatch"
    )
    assert v.fields == ("runtime.profile", "config_yaml.trainer.strategy")
    assert_useful(v, f"runtime profile {profile!r}", f"trainer.strategy={written!r}")


# --- trl-cpu capabilities -------------------------------------------------------------------------


def test_trl_cpu_accepts_the_smoke_shape() -> None:
    assert violations(cpu_topology(), profile="trl-cpu") == []
    two = topology(cpu_plan(policy_num_gpus_per_node=2, num_inference_engines=2), gpus_per_node=2, gpu_variant="cpu")
    assert violations(two, profile="trl-cpu") == []


def test_trl_cpu_is_colocated_only() -> None:
    topo = topology(
        cpu_plan(colocate_all=False, policy_num_gpus_per_node=2, num_inference_engines=1),
        gpus_per_node=2,
        gpu_variant="cpu",
    )
    found = violations(topo, profile="trl-cpu")
    v = [x for x in found if x.code == "runtime.capability"]
    assert len(v) == 1 and v[0].fields == ("role_plan.colocate_all",)
    assert_useful(v[0], "'trl-cpu' supports only colocated roles")


@pytest.mark.parametrize(
    ("field", "label"),
    [("inference_engine_tensor_parallel_size", "TP"), ("inference_engine_pipeline_parallel_size", "PP")],
)
def test_trl_cpu_refuses_model_parallel_inference(field: str, label: str) -> None:
    topo = cpu_topology(cpu_plan(policy_num_gpus_per_node=2, **{field: 2}), gpus_per_node=2)
    v = only(violations(topo, profile="trl-cpu"), "runtime.capability")
    assert v.fields == (f"role_plan.{field}",)
    assert_useful(v, f"inference {label} up to 1; got 2")


def test_trl_cpu_runs_on_one_node() -> None:
    topo = cpu_topology(cpu_plan(policy_num_nodes=2, num_inference_engines=2), num_nodes=2)
    v = only(violations(topo, profile="trl-cpu"), "runtime.capability")
    assert v.fields == ("topology.num_nodes",)
    assert_useful(v, "at most 1 node(s); got 2")


def test_gpu_variant_matches_the_accelerator() -> None:
    v = only(violations(cpu_topology(gpu_variant="H100"), profile="trl-cpu"), "runtime.accelerator")
    assert v.fields == ("topology.gpu_variant",)
    assert_useful(v, "CPU", "'H100'")
    assert "'cpu'" in v.fix
    g = only(violations(topology(gpu_variant="cpu")), "runtime.accelerator")
    assert_useful(g, "GPU", "'cpu'")


@pytest.mark.parametrize(
    ("tree", "key", "fragment"),
    [
        (
            recipe(trainer={"max_tokens_per_microbatch": 4096}),
            "trainer.max_tokens_per_microbatch",
            "does not honour this key",
        ),
        (
            recipe(trainer={"algorithm": {"advantage_estimator": "rloo"}}),
            "trainer.algorithm.advantage_estimator",
            "accepts only ['grpo']",
        ),
        (WANDB_RECIPE, "trainer.logger", "accepts only ['console']"),
    ],
)
def test_trl_cpu_refuses_settings_it_does_not_honour(tree: dict, key: str, fragment: str) -> None:
    v = only(violations(cpu_topology(), tree, profile="trl-cpu"), "runtime.unsupported_setting")
    assert v.fields == (f"config_yaml.{key}",)
    assert_useful(v, key, fragment)


def test_gpu_runtimes_honour_every_base_key() -> None:
    tree = recipe(trainer={"max_tokens_per_microbatch": 4096, "algorithm": {"advantage_estimator": "rloo"}})
    assert check_plan(topology(), tree, "fsdp") == []
