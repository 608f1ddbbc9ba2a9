"""The critic role: PPO with GAE trains a value model beside the policy (`SkyRLCriticPlan`).

It is rendered on SkyRL 0.4.0's keys (placement, mini batch, a model path the host fills with the
policy's model), counted in the GPU budget when it has nodes of its own, and judged by SkyRL's own
critic rules (GAE needs it, colocated it has the policy's GPUs, its mini batch divides per data-
parallel rank). SkyRL's validator accepts and refuses the same plans (tests/contract/skyrl).
"""

from __future__ import annotations

import dataclasses

import pytest

from rlaunch.dotted import get_path
from rlaunch.launch_config.geometry import CRITIC_FROM_POLICY, Geometry
from rlaunch.rules import memory
from rlaunch.rules.roles import _critic_batches as critic_batches
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl import MemoryReport, ModelFacts, SkyRLCriticPlan, SkyRLRolePlan, memory_report
from rlaunch.skyrl.values.config_yaml import render_recipe
from tests.support.specs import codes, only, plan, recipe, seed_plan, topology, violations

GAE = recipe(trainer={"algorithm": {"advantage_estimator": "gae", "use_kl_loss": False}})


def colocated_critic(**changes: int) -> SkyRLRolePlan:
    """1 node x 8 GPUs colocated, with a critic on the same 8 GPUs."""
    return plan(critic=SkyRLCriticPlan(**({"num_nodes": 1, "num_gpus_per_node": 8, "mini_batch_size": 32} | changes)))


def dedicated_critic(**changes: int) -> SkyRLRolePlan:
    """The seed's 64-GPU plan with a critic on one more node of 8."""
    critic = SkyRLCriticPlan(**({"num_nodes": 1, "num_gpus_per_node": 8, "mini_batch_size": 64} | changes))
    return seed_plan(critic=critic)


def test_gae_without_a_critic_is_refused_and_told_to_add_one() -> None:
    v = only(violations(topology(), GAE), "recipe.gae_needs_critic")
    assert "SkyRLCriticPlan" in v.fix and "role_plan.critic" in v.fields


def test_gae_with_a_colocated_critic_passes_and_renders_skyrls_keys() -> None:
    assert violations(topology(colocated_critic()), GAE) == []
    rendered = render_recipe(GAE, colocated_critic(), get_profile("fsdp"), 17)
    assert get_path(rendered, "trainer.placement.critic_num_nodes") == 1
    assert get_path(rendered, "trainer.placement.critic_num_gpus_per_node") == 8
    assert get_path(rendered, "trainer.critic_mini_batch_size") == 32
    assert get_path(rendered, "trainer.critic.model.path") == CRITIC_FROM_POLICY


def test_a_plan_without_a_critic_renders_no_critic_key() -> None:
    rendered = render_recipe(recipe(), plan(), get_profile("fsdp"), 17)
    assert get_path(rendered, "trainer.critic", None) is None
    assert get_path(rendered, "trainer.critic_mini_batch_size", None) is None


def test_a_colocated_critic_must_have_the_policys_gpus() -> None:
    v = only(violations(topology(colocated_critic(num_gpus_per_node=4)), GAE), "role_plan.critic_placement")
    assert v.values == {"critic": 4, "policy": 8}
    assert "num_nodes=1, num_gpus_per_node=8" in v.fix


def test_a_dedicated_critic_is_counted_in_the_gpu_budget() -> None:
    # 64 GPUs: policy 32 + rollout 32 leave nothing for the critic's node
    v = only(violations(topology(dedicated_critic(), num_nodes=8), GAE), "topology.gpu_budget")
    assert v.values == {"planned": 72, "allocated": 64} and "+ critic 8" in v.message
    assert violations(topology(dedicated_critic(), num_nodes=9), GAE) == []


def test_a_dedicated_critic_takes_whole_nodes() -> None:
    found = violations(topology(dedicated_critic(num_nodes=2, num_gpus_per_node=4), num_nodes=9), GAE)
    v = only(found, "role_plan.critic_placement")
    assert v.values == {"critic_gpus_per_node": 4, "gpus_per_node": 8}


@pytest.mark.parametrize(
    ("mini", "fragment"),
    [
        (48, "train_batch_size=64 must be a multiple of the critic's mini_batch_size=48"),
        (128, "train_batch_size=64 must be a multiple of the critic's mini_batch_size=128"),
        (16, None),
        (1, "the critic's per-GPU mini batch 1*8//8=1 is not divisible by the micro batch 2"),
    ],
)
def test_the_critic_mini_batch_follows_skyrls_per_rank_rules(mini: int, fragment: str | None) -> None:
    found = violations(topology(colocated_critic(mini_batch_size=mini)), GAE)
    if fragment is None:
        assert found == []
    else:
        assert fragment in only(found, "batch.critic").message


def test_a_colocated_critic_may_spread_the_policys_gpus_over_other_nodes() -> None:
    """Colocated, SkyRL compares the worlds only: 2 x 4 critic GPUs share a 1 x 8 policy's."""
    found = violations(topology(colocated_critic(num_nodes=2, num_gpus_per_node=4)), GAE)
    assert "role_plan.critic_placement" not in codes(found)


def critic_geometry(train: int, mini: int, n: int, dp: int | None, micro: int) -> Geometry:
    """The fields `_critic_batches` reads, on a real geometry (the rest as the seed plan has them)."""
    fsdp = get_profile("fsdp")
    composed, _ = fsdp.compose(render_recipe(GAE, colocated_critic(), fsdp, 17))
    geo = Geometry.from_recipe(composed)
    # dp None: a sequence parallelism that does not divide the critic's 8 GPUs
    world = {"critic_nodes": 1, "critic_gpus_per_node": 8, "critic_sp": 3} if dp is None else {
        "critic_nodes": 1, "critic_gpus_per_node": dp, "critic_sp": 1}  # fmt: skip
    changed = dataclasses.replace(
        geo, train_batch=train, critic_mini_batch=mini, n_samples=n, micro_batch=micro, **world
    )
    assert changed.critic_dp == dp
    return changed


@pytest.mark.parametrize(
    ("train", "mini", "n", "dp", "micro", "problem"),
    [
        (64, 64, 8, 8, 2, None),  # the mini batch may be the whole train batch
        (64, 32, 8, None, 2, None),  # the critic's sequence parallelism is refused by its own rule
        (64, 3, 8, 8, 0, None),  # ... and a micro batch of 0 by its own
        (64, 3, 8, 8, 1, "train_batch_size=64 must be a multiple of the critic's mini_batch_size=3"),
        (64, 1, 8, 16, 1, "the critic's per-GPU mini batch 1*8//16 is 0 (critic data parallelism 16)"),
        (64, 2, 8, 16, 1, None),
        (
            64,
            32,
            8,
            24,
            1,
            "the critic's per-GPU train batch 64*8//24=21 is not divisible by its per-GPU mini batch 10",
        ),
        (10, 5, 1, 4, 1, None),  # per-GPU batches are floored: 10//4 = 2 is a multiple of 5//4 = 1
    ],
)
def test_the_critics_batch_checks_at_their_edges(
    train: int, mini: int, n: int, dp: int | None, micro: int, problem: str | None
) -> None:
    found = critic_batches(critic_geometry(train, mini, n, dp, micro))
    assert [v.message for v in found] == ([] if problem is None else [f"{problem}: SkyRL's validate_cfg refuses it"])
    for v in found:
        assert v.values == {"train": train, "critic_mini": mini, "critic_dp": dp, "micro": micro}
        assert v.fields == ("role_plan.critic.mini_batch_size", "role_plan.train_batch_size")


def test_a_critic_size_must_be_positive() -> None:
    found = violations(topology(colocated_critic(mini_batch_size=0)), GAE)
    assert "role_plan.non_positive" in codes(found)
    assert only(found, "role_plan.non_positive").fields == ("role_plan.critic.mini_batch_size",)


def test_a_critic_on_megatron_is_refused() -> None:
    megatron = recipe(trainer={"algorithm": {"advantage_estimator": "gae", "use_kl_loss": False}})
    found = violations(topology(colocated_critic()), megatron, profile="megatron")
    assert "SkyRL 0.4.0 trains a critic only with FSDP" in only(found, "recipe.critic").message


def test_a_critic_path_in_the_recipe_is_refused() -> None:
    found = violations(topology(), recipe(trainer={"critic": {"model": {"path": "/m"}}}))
    assert "SkyRLCriticPlan" in only(found, "recipe.critic").fix


def test_the_critic_joins_the_tail_stride_and_the_geometry_reads_it_back() -> None:
    fsdp = get_profile("fsdp")
    composed, problems = fsdp.compose(render_recipe(GAE, colocated_critic(), fsdp, 17))
    assert not problems
    geo = Geometry.from_recipe(composed)
    assert geo.use_critic and geo.critic_world == 8 and geo.critic_dp == 8
    assert geo.planned_gpus == 8  # colocated: the policy's GPUs
    assert geo.lcm_dp(critic=True) == 8


def test_a_dedicated_critics_data_parallel_size_joins_the_tail_stride() -> None:
    # policy dp 32, critic dp 24: SkyRL trims to lcm(32, 24) / gcd(96, 8) = 12 prompts; 256 is not a multiple
    found = violations(topology(dedicated_critic(num_nodes=3), num_nodes=11), GAE)
    assert "= 12 prompts" in only(found, "batch.tail_stride").message
    assert "batch.tail_stride" not in codes(violations(topology(dedicated_critic(num_nodes=2), num_nodes=10), GAE))


# --- memory: the critic's rows --------------------------------------------------------------------

QWEN3_8B_CONFIG = {
    "model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "max_position_embeddings": 40960, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
}  # fmt: skip


def rows(report: MemoryReport) -> dict[tuple[str, str], memory.Row]:
    return {(r.role, r.phase): r for r in report.table.rows}


def test_a_critic_is_sized_as_the_policys_model_with_a_value_head() -> None:
    model = ModelFacts.from_hf_config(QWEN3_8B_CONFIG)
    arch = model.architecture
    with_critic = rows(memory_report(topology(colocated_critic()), GAE, "fsdp", model))
    without = rows(memory_report(topology(), GAE, "fsdp", model))
    assert ("critic", "model states") not in without
    value_model = arch.params.total - arch.params.lm_head + arch.hidden  # the LM head replaced by hidden -> 1
    states = with_critic["critic", "model states"]
    assert states.estimate == value_model * 16 // 8 and states.certain == value_model * 12 // 8
    # its step keeps one fp32 value a token where the policy keeps a vocabulary of logits
    tokens = 2 * (1024 + 3072)
    policy_logits = dict(with_critic["colocated", "training bar"].parts)["logits"]
    critic_logits = dict(with_critic["critic", "training step"].parts)["logits"]
    assert (policy_logits, critic_logits) == (tokens * arch.vocab * 4, tokens * 4)  # 2 bf16 vs 1 fp32
    assert with_critic["policy", "model states"] == without["policy", "model states"]


def test_a_critic_whose_states_exceed_its_gpus_is_refused_with_the_critics_fix() -> None:
    model = ModelFacts.from_hf_config(QWEN3_8B_CONFIG)
    one_gpu = seed_plan(critic=SkyRLCriticPlan(1, 1, 64))  # 8B x 12 bytes on one H100
    found = violations(topology(one_gpu, num_nodes=9, gpus_per_node=8), GAE, model=model)
    v = only(found, "memory.model_states")
    assert v.message.startswith("critic model states") and "role_plan.critic.num_nodes" in v.fields
    assert "trainer.critic.fsdp_config.cpu_offload=true" in v.fix
    assert "config_yaml.trainer.critic.fsdp_config.cpu_offload=true" in " ".join(v.values.get("nearest_fits", []))


# --- the plan's views: GPUs by role, parity ------------------------------------------------------


def test_the_plan_shows_the_critics_gpus_and_parity_needs_the_same_critic(prefix: str) -> None:
    from rlaunch.judgement.parity import differences, shape_of_document
    from rlaunch.skyrl.views.plan_view import describe_step
    from tests.support.specs import planned_launch_view, planned_view, spec, to_yaml

    gae, plain = to_yaml(GAE), to_yaml(recipe())
    with_critic = planned_launch_view(spec(topo=topology(colocated_critic()), config_yaml=gae), prefix=prefix)
    text = "\n".join(describe_step(*with_critic))
    assert (
        "GPUs by role        policy 8, rollout 8 (shared with policy), reference none (no KL), critic 8 (shared with policy)"
        in text
    )
    without = planned_launch_view(spec(topo=topology(), config_yaml=plain), prefix=prefix)
    assert ", critic" not in "\n".join(describe_step(*without))
    found = differences(shape_of_document(without[0].document), shape_of_document(with_critic[0].document))
    assert ("geometry", "critic", None, "colocated") in {(d.kind, d.field, d.smoke, d.large) for d in found}
    again = planned_view(spec(topo=topology(colocated_critic(mini_batch_size=16)), config_yaml=gae), prefix=prefix)
    assert (
        differences(shape_of_document(again[0]), shape_of_document(with_critic[0].document)) == []
    )  # a batch is scale


def test_engines_pack_into_the_nodes_left_after_the_policy_and_a_dedicated_critic() -> None:
    """8 nodes of 8: policy 4 nodes, critic 1, and 8 engines of TP 3 (two a node) need 4 of the 3 left."""
    critic = SkyRLCriticPlan(num_nodes=1, num_gpus_per_node=8, mini_batch_size=64)
    shape = seed_plan(
        critic=critic,
        num_inference_engines=8,
        inference_engine_tensor_parallel_size=3,
        inference_engine_data_parallel_size=1,
    )
    v = only(violations(topology(shape, num_nodes=8), GAE), "engine.rollout_packing")
    assert v.message == (
        "8 engines of 3 GPUs need 4 whole node(s) (engines never straddle nodes) but 3 remain after the policy "
        "and the critic"
    )
    assert v.values == {"needed_nodes": 4, "free_nodes": 3}
