"""Batch arithmetic: the launcher's rules and SkyRL's per-GPU rules with the policy data-parallel size.

The policy dp is SkyRL's: FSDP world // sequence_parallel_size (which must divide the world),
Megatron world // (TP x PP x CP) (which must divide exactly); per-GPU sizes are floor divisions.
"""

from __future__ import annotations

from rlaunch.skyrl import SkyRLTopology
from tests.support.specs import assert_useful, codes, only, plan, recipe, seed_topology, topology, violations

NO_KL = {"algorithm": {"use_kl_loss": False}}


def batches(train: int, mini: int, micro: int, n: int) -> SkyRLTopology:
    """The 1 x 8 GPU plan with these train, mini and micro batch sizes and samples per prompt."""
    return topology(
        plan(
            train_batch_size=train,
            policy_mini_batch_size=mini,
            micro_train_batch_size_per_gpu=micro,
            n_samples_per_prompt=n,
        )
    )


def megatron(policy: dict | None = None, ref: dict | None = None, **trainer: object) -> dict:
    section: dict = dict(trainer)
    if policy:
        section["policy"] = {"megatron_config": policy}
    if ref:
        section["ref"] = {"megatron_config": ref}
    return recipe(trainer=section)


def test_train_batch_divisible_by_mini_batch() -> None:
    v = only(violations(topology(plan(train_batch_size=48, policy_mini_batch_size=32))), "batch.train_mini")
    assert v.fields == ("role_plan.train_batch_size", "role_plan.policy_mini_batch_size")
    assert_useful(v, "train_batch_size=48", "policy_mini_batch_size=32")
    assert "[2, 4, 6, 8, 12, 16, 24, 48]" in v.fix  # the divisors that keep the per-GPU rules (1 and 3 do not)


def test_the_micro_batch_divides_the_sequences_on_a_gpu_not_the_prompts() -> None:
    """mini 4 prompts x 6 samples over dp 8 is 3 sequences per GPU: micro 3 splits them evenly (SkyRL
    accepts it and nothing fails later), although 4 prompts are no multiple of 3."""
    assert violations(topology(plan(train_batch_size=8, policy_mini_batch_size=4, n_samples_per_prompt=6,
                                    micro_train_batch_size_per_gpu=3))) == []  # fmt: skip
    v = only(violations(topology(plan(micro_train_batch_size_per_gpu=3))), "batch.per_gpu_mini_micro")
    assert_useful(v, "32*8//8=32", "micro_train_batch_size_per_gpu=3")


def test_per_gpu_mini_batch_is_positive() -> None:
    # mini x n // dp = 1 x 4 // 8 = 0 sequences per GPU.
    found = violations(
        batches(1, 1, 1, 4),
        recipe(trainer=NO_KL),
    )
    v = only(found, "batch.per_gpu_mini_zero")
    assert v.fields == ("role_plan.policy_mini_batch_size", "role_plan.n_samples_per_prompt")
    assert_useful(v, "1*4//8 = 0")
    assert "8" in v.fix


def test_per_gpu_mini_batch_divisible_by_micro_batch() -> None:
    # mini 16 divides by micro 8, but per GPU 16 x 2 // 8 = 4 does not.
    found = violations(batches(32, 16, 8, 2))
    assert codes(found) == ["batch.per_gpu_mini_micro"]
    v = found[0]
    assert v.fields == ("role_plan.micro_train_batch_size_per_gpu",)
    assert_useful(v, "16*2//8=4", "micro_train_batch_size_per_gpu=8")
    assert "[1, 2, 4]" in v.fix


def test_per_gpu_train_batch_divisible_by_per_gpu_mini_batch() -> None:
    # train 24 % mini 6 == 0, yet per GPU (24 x 3 // 8) = 9 is not a multiple of (6 x 3 // 8) = 2 (floor).
    found = violations(batches(24, 6, 2, 3))
    assert codes(found) == ["batch.per_gpu_train_mini"]
    v = found[0]
    assert v.fields == ("role_plan.train_batch_size", "role_plan.policy_mini_batch_size")
    assert_useful(v, "24*3//8=9", "per-GPU mini batch 2")


def test_reference_model_needs_train_times_n_at_least_lcm_of_dps() -> None:
    # Megatron policy TP8 -> policy dp 1; the reference keeps TP1 -> ref dp 8; lcm = 8 > 2 x 2.
    topo = batches(2, 2, 1, 2)
    found = violations(topo, megatron(policy={"tensor_model_parallel_size": 8}), profile="megatron")
    v = only(found, "batch.reference_lcm")
    assert v.fields == ("role_plan.train_batch_size", "role_plan.n_samples_per_prompt")
    assert_useful(v, "=4 must be at least lcm(policy dp 1, reference dp 8)=8")
    assert "8" in v.fix
    # Without a reference model (no KL) the lcm is over the policy alone and the plan passes.
    assert violations(topo, megatron(policy={"tensor_model_parallel_size": 8}, **NO_KL), profile="megatron") == []


def test_tail_trim_stride_divides_train_batch() -> None:
    # dp 8, n 1: SkyRL keeps a multiple of 8 / gcd(8, 1) = 8 prompts; 12 is not one (SkyRL #1609).
    found = violations(batches(12, 12, 1, 1))
    assert codes(found) == ["batch.tail_stride"]
    v = found[0]
    assert v.fields == ("role_plan.train_batch_size", "role_plan.n_samples_per_prompt")
    assert_useful(v, "lcm_dp/gcd(lcm_dp, n) = 8", "train_batch_size=12", "#1609")
    assert "multiple of 8" in v.fix


def test_tail_trim_stride_uses_the_samples_per_prompt() -> None:
    # Same dp, n 2: stride 8 / gcd(8, 2) = 4, and 12 is a multiple of 4.
    assert violations(batches(12, 12, 1, 2)) == []


def test_fsdp_dp_is_world_over_sequence_parallel() -> None:
    tight = plan(
        train_batch_size=32, policy_mini_batch_size=16, micro_train_batch_size_per_gpu=8, n_samples_per_prompt=2
    )
    # dp 8: 16 x 2 // 8 = 4 per GPU, not divisible by micro 8 ...
    assert codes(violations(topology(tight))) == ["batch.per_gpu_mini_micro"]
    # ... Ulysses SP 2 halves dp to 4: 16 x 2 // 4 = 8 per GPU.
    assert (
        violations(
            topology(tight),
            recipe(trainer={"policy": {"sequence_parallel_size": 2}, "ref": {"sequence_parallel_size": 2}}),
        )
        == []
    )


def test_fsdp_sequence_parallel_divides_the_world() -> None:
    v = only(
        violations(topology(), recipe(trainer={"policy": {"sequence_parallel_size": 3}})), "strategy.sequence_parallel"
    )
    assert v.fields == ("config_yaml.trainer.policy.sequence_parallel_size",)
    assert_useful(v, "sequence_parallel_size=3", "world size 8")
    ref = only(
        violations(topology(), recipe(trainer={"ref": {"sequence_parallel_size": 5}})), "strategy.sequence_parallel"
    )
    assert ref.fields == ("config_yaml.trainer.ref.sequence_parallel_size",)


def test_megatron_model_parallel_divides_the_world() -> None:
    found = violations(topology(), megatron(policy={"tensor_model_parallel_size": 3}), profile="megatron")
    v = only(found, "strategy.megatron_world")
    assert v.fields == ("config_yaml.trainer.policy.megatron_config",)
    assert_useful(v, "world size 8", "TP*PP*CP=3*1*1=3")
    assert "[1, 2, 4, 8]" in v.fix


def test_megatron_dp_is_world_over_model_parallel() -> None:
    small = plan(train_batch_size=2, policy_mini_batch_size=2, micro_train_batch_size_per_gpu=1, n_samples_per_prompt=1)
    # FSDP dp 8: 2 x 1 // 8 = 0 per GPU.
    assert "batch.per_gpu_mini_zero" in codes(violations(topology(small), recipe(trainer=NO_KL)))
    # Megatron TP2 x PP2 on 8 GPUs: dp 2, 1 sequence per GPU.
    assert (
        violations(
            topology(small),
            megatron(policy={"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2}, **NO_KL),
            profile="megatron",
        )
        == []
    )


def test_megatron_context_parallel_needs_padding_removal_and_no_ulysses() -> None:
    found = violations(
        topology(),
        megatron(
            policy={"context_parallel_size": 2}, ref={"context_parallel_size": 2}, remove_microbatch_padding=False
        ),
        profile="megatron",
    )
    v = only(found, "strategy.megatron_context_parallel")
    assert v.fields == (
        "config_yaml.trainer.remove_microbatch_padding",
        "config_yaml.trainer.policy.megatron_config.context_parallel_size",
        "config_yaml.trainer.ref.megatron_config.context_parallel_size",
    )
    assert v.values == {"policy_cp": 2, "ref_cp": 2}
    sp = only(
        violations(topology(), recipe(trainer={"policy": {"sequence_parallel_size": 2}}), profile="megatron"),
        "strategy.megatron_sequence_parallel",
    )
    assert sp.fields == ("config_yaml.trainer.policy.sequence_parallel_size",)


def test_megatron_expert_parallel_divides_the_world() -> None:
    v = only(
        violations(topology(), megatron(policy={"expert_model_parallel_size": 3}), profile="megatron"),
        "strategy.megatron_expert",
    )
    assert_useful(v, "world size 8", "PP*EP*ETP=1*3*1")


def test_seed_batch_numbers_on_the_64_gpu_plan() -> None:
    # dp 32, n 8: per-GPU mini 64 x 8 // 32 = 16; micro 2; per-GPU train 64; stride 32 / 8 = 4.
    assert violations(seed_topology()) == []
    found = violations(seed_topology(train_batch_size=250, micro_train_batch_size_per_gpu=3))
    assert set(codes(found)) >= {
        "batch.train_mini",
        "batch.per_gpu_mini_micro",
        "batch.per_gpu_train_mini",
        "batch.tail_stride",
    }


def test_forward_micro_batch_is_positive_and_defaults_to_the_train_micro_batch() -> None:
    from rlaunch.runtimes.registry import get_profile
    from rlaunch.skyrl.values.config_yaml import render_recipe

    v = only(violations(topology(), recipe(trainer={"micro_forward_batch_size_per_gpu": 0})), "batch.micro_forward")
    assert v.fields == ("config_yaml.trainer.micro_forward_batch_size_per_gpu",)
    assert render_recipe(recipe(), plan(), get_profile("fsdp"), 0)["trainer"]["micro_forward_batch_size_per_gpu"] == 2
