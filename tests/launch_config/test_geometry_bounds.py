"""Every geometry number at its edge: the smallest size it derives and the largest it refuses
(None), rollout packing with a partly filled last node, and the arithmetic against a plain
re-derivation (hypothesis), so an off-by-one or a dropped factor fails here."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlaunch.launch_config.composition import set_path
from rlaunch.launch_config.geometry import (
    CRITIC_FROM_POLICY,
    CRITIC_KEYS,
    ROLE_PLAN_KEYS,
    Geometry,
    _ceil_div,
    plan_values,
    rendered_plan,
)

# The seed's 64-GPU plan: policy 4 x 8, four engines of DP 8, reference on the policy's GPUs.
SEED = Geometry(
    strategy="fsdp", colocate_all=False, policy_nodes=4, policy_gpus_per_node=8, ref_nodes=4, ref_gpus_per_node=8,
    engines=4, tp=1, pp=1, dp=8, ep=1, train_batch=256, mini_batch=64, micro_batch=2, n_samples=8,
    use_reference=True, policy_sp=1, ref_sp=1, megatron_policy=(1, 1, 1), megatron_ref=(1, 1, 1),
)  # fmt: skip
PLAN: dict[str, Any] = {
    "colocate_all": False, "policy_num_nodes": 4, "policy_num_gpus_per_node": 8, "num_inference_engines": 4,
    "inference_engine_tensor_parallel_size": 2, "inference_engine_pipeline_parallel_size": 3,
    "inference_engine_data_parallel_size": 5, "inference_engine_expert_parallel_size": 7,
    "train_batch_size": 256, "policy_mini_batch_size": 64, "micro_train_batch_size_per_gpu": 2,
    "n_samples_per_prompt": 8,
}  # fmt: skip


def geo(**changes: Any) -> Geometry:
    return replace(SEED, **changes)


def test_a_rendered_plan_sets_its_twelve_keys_and_the_reference_and_engines_it_implies() -> None:
    out = rendered_plan(PLAN)
    assert {key: out[key] for key in ROLE_PLAN_KEYS.values()} == {ROLE_PLAN_KEYS[k]: v for k, v in PLAN.items()}
    assert out["trainer.placement.colocate_policy_ref"] is True
    assert out["trainer.placement.ref_num_nodes"] == 4 and out["trainer.placement.ref_num_gpus_per_node"] == 8
    assert out["generator.inference_engine.run_engines_locally"] is True
    assert len(out) == len(ROLE_PLAN_KEYS) + 4
    tree: dict[str, Any] = {}
    for key, value in out.items():
        set_path(tree, key, value)
    assert plan_values(tree) == PLAN | {"critic": None}


def test_a_rendered_critic_sets_skyrls_critic_keys_and_reads_back() -> None:
    critic = {"num_nodes": 2, "num_gpus_per_node": 8, "mini_batch_size": 32}
    out = rendered_plan(PLAN | {"critic": critic})
    assert {key: out[key] for key in CRITIC_KEYS.values()} == {CRITIC_KEYS[k]: v for k, v in critic.items()}
    assert out["trainer.critic.model.path"] == CRITIC_FROM_POLICY
    assert len(out) == len(ROLE_PLAN_KEYS) + 4 + len(CRITIC_KEYS) + 1
    tree: dict[str, Any] = {}
    for key, value in out.items():
        set_path(tree, key, value)
    assert plan_values(tree) == PLAN | {"critic": critic}
    full = _recipe()
    for key, value in out.items():
        set_path(full, key, value)
    set_path(full, "trainer.critic.sequence_parallel_size", 2)
    g = Geometry.from_recipe(full)
    assert (g.use_critic, g.critic_world, g.critic_mini_batch, g.critic_dp) == (True, 16, 32, 8)
    assert g.planned_gpus == 32 + 4 * 2 * 3 * 5 + 16  # not colocated: the critic's nodes are its own
    assert g.physical_nodes(8) == 4 + 4 * 30 // 8 + 2
    set_path(full, "trainer.critic.model.path", "/somewhere/else")  # refused by recipe.critic, not a critic role
    assert plan_values(full)["critic"] is None and not Geometry.from_recipe(full).use_critic


def _recipe(use_kl_loss: bool = False, use_kl_in_reward: bool = False) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for key, value in rendered_plan(PLAN).items():
        set_path(tree, key, value)
    set_path(tree, "trainer.strategy", "megatron")
    set_path(tree, "trainer.placement.ref_num_nodes", 3)
    set_path(tree, "trainer.placement.ref_num_gpus_per_node", 2)
    set_path(tree, "trainer.policy.sequence_parallel_size", 4)
    set_path(tree, "trainer.ref.sequence_parallel_size", 2)
    set_path(tree, "trainer.algorithm.use_kl_loss", use_kl_loss)
    set_path(tree, "trainer.algorithm.use_kl_in_reward", use_kl_in_reward)
    return tree


def test_geometry_reads_every_number_from_its_own_key() -> None:
    tree = _recipe()
    set_path(tree, "trainer.policy.megatron_config", {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 3, "context_parallel_size": 5})  # fmt: skip
    set_path(tree, "trainer.ref.megatron_config", {"tensor_model_parallel_size": 7})
    g = Geometry.from_recipe(tree)
    assert g == Geometry(
        strategy="megatron", colocate_all=False, policy_nodes=4, policy_gpus_per_node=8, ref_nodes=3,
        ref_gpus_per_node=2, engines=4, tp=2, pp=3, dp=5, ep=7, train_batch=256, mini_batch=64, micro_batch=2,
        n_samples=8, use_reference=False, policy_sp=4, ref_sp=2, megatron_policy=(2, 3, 5), megatron_ref=(7, 1, 1),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("kl_loss", "kl_in_reward", "expected"),
    [(False, False, False), (True, False, True), (False, True, True), (True, True, True)],
)
def test_either_kl_setting_needs_the_reference(kl_loss: bool, kl_in_reward: bool, expected: bool) -> None:
    g = Geometry.from_recipe(_recipe(use_kl_loss=kl_loss, use_kl_in_reward=kl_in_reward))
    assert g.use_reference is expected


def test_megatron_sizes_default_to_one() -> None:
    g = Geometry.from_recipe(_recipe())
    assert g.megatron_policy == (1, 1, 1) and g.megatron_ref == (1, 1, 1)


def test_gpus_by_role_multiply_every_factor() -> None:
    g = geo(policy_nodes=3, policy_gpus_per_node=5, ref_nodes=2, ref_gpus_per_node=7, engines=11, tp=2, pp=3, dp=13)
    assert (g.policy_world, g.ref_world) == (15, 14)
    assert (g.engine_slice, g.engine_gpus, g.rollout_gpus) == (6, 78, 858)
    assert g.planned_gpus == 15 + 858
    assert replace(g, colocate_all=True).planned_gpus == 15


# --- nodes -------------------------------------------------------------------------------------


def test_engines_per_node_at_its_edges() -> None:
    assert geo(dp=1).engines_per_node(1) == 1  # the smallest sizes it derives
    assert geo(dp=8).engines_per_node(8) == 1 and geo(dp=8).engines_per_node(15) == 1
    assert geo(dp=8).engines_per_node(16) == 2
    assert geo(dp=9).engines_per_node(8) == 0  # one engine is wider than a node
    assert geo(dp=8).engines_per_node(0) is None  # the largest sizes it refuses
    assert geo(dp=8).engines_per_node(-8) is None
    assert geo(dp=0).engines_per_node(8) is None
    assert geo(tp=-1).engines_per_node(8) is None


def test_rollout_nodes_fill_whole_nodes_and_count_a_partly_filled_last_one() -> None:
    assert geo(engines=4, dp=8).rollout_nodes(8) == 4  # one engine per node
    assert geo(engines=4, dp=4).rollout_nodes(8) == 2  # two per node, all full
    assert geo(engines=5, dp=4).rollout_nodes(8) == 3  # the last node holds one engine of two
    assert geo(engines=6, dp=3).rollout_nodes(8) == 3  # two 3-GPU engines a node, 2 GPUs of each left over
    assert geo(engines=7, dp=3).rollout_nodes(8) == 4
    assert geo(engines=1, dp=1).rollout_nodes(8) == 1
    assert geo(engines=0, dp=1).rollout_nodes(8) == 0


def test_an_engine_wider_than_a_node_spans_whole_nodes_by_its_gpus() -> None:
    assert geo(engines=1, dp=9).rollout_nodes(8) == 2
    assert geo(engines=3, dp=12).rollout_nodes(8) == 5  # 36 GPUs: four full nodes and a half
    assert geo(engines=2, dp=16).rollout_nodes(8) == 4


def test_colocated_engines_need_no_node_and_an_underivable_size_none() -> None:
    assert geo(colocate_all=True, dp=0).rollout_nodes(8) == 0
    assert geo(colocate_all=True).physical_nodes(8) == 4
    assert geo(dp=0).rollout_nodes(8) is None and geo(dp=0).physical_nodes(8) is None
    assert geo().rollout_nodes(0) is None and geo().physical_nodes(0) is None
    assert geo(engines=5, dp=4, policy_nodes=3).physical_nodes(8) == 6


@given(
    engines=st.integers(min_value=0, max_value=300),
    width=st.integers(min_value=1, max_value=40),
    gpus_per_node=st.integers(min_value=1, max_value=40),
)
def test_rollout_nodes_are_the_fewest_whole_nodes_that_hold_every_engine(
    engines: int, width: int, gpus_per_node: int
) -> None:
    g = geo(engines=engines, tp=1, pp=1, dp=width)
    nodes = g.rollout_nodes(gpus_per_node)
    assert nodes is not None
    per_node = gpus_per_node // width
    if per_node:
        assert g.engines_per_node(gpus_per_node) == per_node
        assert nodes * per_node >= engines > (nodes - 1) * per_node or nodes == engines == 0
    else:
        assert nodes * gpus_per_node >= engines * width > (nodes - 1) * gpus_per_node or nodes == engines == 0


@given(a=st.integers(min_value=-(2**80), max_value=2**80), b=st.integers(min_value=1, max_value=2**70))
def test_ceil_div_is_the_exact_integer_ceiling(a: int, b: int) -> None:
    q = _ceil_div(a, b)
    assert q * b >= a > (q - 1) * b


# --- data parallelism and batches --------------------------------------------------------------


def test_data_parallel_at_its_edges() -> None:
    g = geo()
    assert g.data_parallel(1, 1, (9, 9, 9)) == 1  # fsdp: sequence parallelism only
    assert g.data_parallel(32, 4, (1, 1, 1)) == 8
    assert g.data_parallel(32, 32, (1, 1, 1)) == 1
    assert g.data_parallel(32, 64, (1, 1, 1)) is None
    assert g.data_parallel(32, 3, (1, 1, 1)) is None  # does not divide
    assert g.data_parallel(0, 1, (1, 1, 1)) is None and g.data_parallel(-32, 1, (1, 1, 1)) is None
    assert g.data_parallel(32, 0, (1, 1, 1)) is None and g.data_parallel(32, -1, (1, 1, 1)) is None
    m = geo(strategy="megatron")
    assert m.data_parallel(60, 7, (2, 3, 5)) == 2  # tp x pp x cp, sequence parallelism ignored
    assert m.data_parallel(30, 1, (2, 3, 5)) == 1
    assert m.data_parallel(20, 1, (2, 2, 5)) == 1 and m.data_parallel(20, 1, (2, 3, 5)) is None
    assert m.data_parallel(8, 1, (2, 0, 1)) is None and m.data_parallel(8, 1, (-2, -2, 1)) is None


def test_role_data_parallel_sizes_use_each_roles_own_world_and_model_parallelism() -> None:
    g = geo(policy_nodes=2, policy_gpus_per_node=6, ref_nodes=3, ref_gpus_per_node=4, policy_sp=3, ref_sp=4)
    assert (g.policy_dp, g.ref_dp) == (4, 3)
    m = geo(strategy="megatron", megatron_policy=(2, 2, 1), megatron_ref=(1, 1, 4))
    assert (m.policy_dp, m.ref_dp) == (8, 8)


def test_per_gpu_batches_floor_and_an_empty_rank_is_zero() -> None:
    g = geo(train_batch=250, mini_batch=50, n_samples=3)
    assert g.per_gpu_mini(1) == 150 and g.per_gpu_mini(7) == 21 and g.per_gpu_mini(150) == 1
    assert g.per_gpu_mini(151) == 0
    assert g.per_gpu_train(1) == 750 and g.per_gpu_train(7) == 107
    assert g.per_gpu_mini(0) == 0 and g.per_gpu_train(0) == 0
    assert g.per_gpu_mini(-1) == 0 and g.per_gpu_train(-1) == 0


def test_gradient_accumulation_and_optimizer_steps_at_their_edges() -> None:
    g = geo()  # per-GPU mini batch 64 * 8 / 32 = 16
    assert g.gradient_accumulation == 8
    assert geo(micro_batch=1).gradient_accumulation == 16 and geo(micro_batch=16).gradient_accumulation == 1
    assert geo(micro_batch=17).gradient_accumulation == 0 and geo(micro_batch=5).gradient_accumulation == 3
    assert geo(micro_batch=0).gradient_accumulation is None and geo(micro_batch=-2).gradient_accumulation is None
    assert geo(policy_sp=3).gradient_accumulation is None  # no data-parallel size
    assert geo(policy_sp=2).gradient_accumulation == 16  # dp 16: 32 sequences a rank
    assert g.optimizer_steps == 4 and geo(mini_batch=256).optimizer_steps == 1
    assert geo(mini_batch=100).optimizer_steps == 2 and geo(mini_batch=257).optimizer_steps == 0
    assert geo(mini_batch=1).optimizer_steps == 256
    assert geo(mini_batch=0).optimizer_steps is None and geo(mini_batch=-64).optimizer_steps is None


def test_the_tail_stride_counts_the_reference_only_when_it_is_used() -> None:
    g = geo(policy_gpus_per_node=6, ref_gpus_per_node=5, n_samples=4)  # dp 24 and 20
    assert g.lcm_dp() == 120 and g.tail_stride() == 30
    alone = replace(g, use_reference=False)
    assert alone.lcm_dp() == 24 and alone.tail_stride() == 6
    broken_ref = replace(g, ref_sp=3)  # 20 % 3: the reference has no data-parallel size
    assert broken_ref.lcm_dp() is None and broken_ref.tail_stride() is None
    assert replace(broken_ref, use_reference=False).lcm_dp() == 24
    assert geo(policy_sp=3).lcm_dp() is None and geo(policy_sp=3).tail_stride() is None
    assert geo(n_samples=1).tail_stride() == 32 and geo(n_samples=64).tail_stride() == 1


def test_a_critic_counts_in_the_tail_stride_not_the_batch_lcm_and_adds_nodes_only_when_not_colocated() -> None:
    g = geo(use_critic=True, critic_nodes=3, critic_gpus_per_node=1)  # critic dp 3 beside the policy's 32
    assert g.lcm_dp() == 32 and g.lcm_dp(critic=True) == 96 and g.tail_stride() == 96 // 8
    assert replace(g, critic_sp=3).tail_stride() == 4  # a critic of dp 1 divides everything
    assert replace(g, critic_sp=2).tail_stride() is None  # 3 % 2: the critic has no data-parallel size
    assert g.physical_nodes(8) == 4 + 4 + 3
    assert replace(g, colocate_all=True).physical_nodes(8) == 4  # the critic shares the policy's nodes
    assert replace(g, use_critic=False).physical_nodes(8) == 4 + 4  # no critic: its sizes count for nothing


def test_a_critics_sequence_parallel_size_defaults_to_one_and_is_read_only_for_a_critic() -> None:
    critic = {"num_nodes": 2, "num_gpus_per_node": 8, "mini_batch_size": 32}
    full = _recipe()
    for key, value in rendered_plan(PLAN | {"critic": critic}).items():
        set_path(full, key, value)
    g = Geometry.from_recipe(full)  # no trainer.critic.sequence_parallel_size
    assert (g.critic_sp, g.critic_dp, g.trims_tail) == (1, 16, True)
    alone = _recipe()
    set_path(alone, "trainer.critic.sequence_parallel_size", 2)
    assert Geometry.from_recipe(alone).critic_sp == 1 and Geometry.from_recipe(alone).critic_dp is None


@given(
    policy=st.integers(min_value=1, max_value=64),
    ref=st.integers(min_value=1, max_value=64),
    n_samples=st.integers(min_value=1, max_value=64),
    use_reference=st.booleans(),
)
def test_the_tail_stride_is_the_fewest_prompts_every_rank_splits_evenly(
    policy: int, ref: int, n_samples: int, use_reference: bool
) -> None:
    g = geo(
        policy_nodes=1, policy_gpus_per_node=policy, ref_nodes=1, ref_gpus_per_node=ref,
        n_samples=n_samples, use_reference=use_reference,
    )  # fmt: skip
    worlds = [policy, ref] if use_reference else [policy]
    stride = g.tail_stride()
    assert stride is not None
    fits = lambda prompts: all(prompts * n_samples % w == 0 for w in worlds)  # noqa: E731
    assert fits(stride) and not any(fits(p) for p in range(1, stride))
    assert g.lcm_dp() == math.lcm(*worlds)
