"""Batch rules: SkyRL's per-data-parallel-rank divisibility, the reference lcm and the tail stride,
plus the FSDP (Ulysses) and Megatron parallelism the data-parallel size depends on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlaunch.launch_config.geometry import Geometry
from rlaunch.launch_config.recipe import get_path
from rlaunch.rules.common import Violation, divisor_hint, violation

CODES = (
    "batch.train_mini",
    "batch.mini_micro",
    "batch.micro_forward",
    "batch.per_gpu_mini_zero",
    "batch.per_gpu_mini_micro",
    "batch.per_gpu_train_mini",
    "batch.reference_lcm",
    "batch.tail_stride",
    "strategy.megatron_non_positive",
    "strategy.megatron_world",
    "strategy.megatron_expert",
    "strategy.megatron_sequence_parallel",
    "strategy.megatron_context_parallel",
    "strategy.sequence_parallel",
)

MEGATRON_SIZES = (
    "tensor_model_parallel_size",
    "pipeline_model_parallel_size",
    "context_parallel_size",
    "expert_model_parallel_size",
    "expert_tensor_parallel_size",
)


def batch_rules(geo: Geometry, composed: Mapping[str, Any]) -> list[Violation]:
    train, mini, micro, n = geo.train_batch, geo.mini_batch, geo.micro_batch, geo.n_samples
    out = []
    if train % mini:
        out.append(
            violation(
                "batch.train_mini",
                ["role_plan.train_batch_size", "role_plan.policy_mini_batch_size"],
                f"train_batch_size={train} must be divisible by policy_mini_batch_size={mini}",
                f"choose a mini batch among the divisors of {train}: {divisor_hint(train)}",
                train=train,
                mini=mini,
            )
        )
    if mini % micro:
        out.append(
            violation(
                "batch.mini_micro",
                ["role_plan.policy_mini_batch_size", "role_plan.micro_train_batch_size_per_gpu"],
                f"policy_mini_batch_size={mini} must be divisible by micro_train_batch_size_per_gpu={micro}",
                f"choose a micro batch among the divisors of {mini}: {divisor_hint(mini)}",
                mini=mini,
                micro=micro,
            )
        )
    micro_forward = get_path(composed, "trainer.micro_forward_batch_size_per_gpu")
    if micro_forward <= 0:
        out.append(
            violation(
                "batch.micro_forward",
                ["config_yaml.trainer.micro_forward_batch_size_per_gpu"],
                f"micro_forward_batch_size_per_gpu={micro_forward} must be positive",
                "set it to a positive integer",
                value=micro_forward,
            )
        )
    sizes = strategy_sizes(geo, composed)
    out += sizes
    if sizes:
        return out  # the data-parallel size needs positive model-parallel sizes
    out += strategy_divisibility(geo, composed)
    dp = geo.policy_dp
    if dp is None:
        return out
    mini_per_gpu = geo.per_gpu_mini(dp)
    if mini_per_gpu <= 0:
        out.append(
            violation(
                "batch.per_gpu_mini_zero",
                ["role_plan.policy_mini_batch_size", "role_plan.n_samples_per_prompt"],
                f"per-GPU mini batch policy_mini_batch_size*n_samples_per_prompt//dp = {mini}*{n}//{dp} = 0",
                f"raise mini*n to at least the policy data-parallel size {dp}",
                mini=mini,
                n=n,
                dp=dp,
            )
        )
    else:
        if mini_per_gpu % micro:
            out.append(
                violation(
                    "batch.per_gpu_mini_micro",
                    ["role_plan.micro_train_batch_size_per_gpu"],
                    f"per-GPU mini batch {mini}*{n}//{dp}={mini_per_gpu} is not divisible by micro_train_batch_size_per_gpu={micro}",
                    f"choose a micro batch among the divisors of {mini_per_gpu}: {divisor_hint(mini_per_gpu)}",
                    per_gpu_mini=mini_per_gpu,
                    micro=micro,
                )
            )
        train_per_gpu = geo.per_gpu_train(dp)
        if train_per_gpu % mini_per_gpu:
            out.append(
                violation(
                    "batch.per_gpu_train_mini",
                    ["role_plan.train_batch_size", "role_plan.policy_mini_batch_size"],
                    f"per-GPU train batch {train}*{n}//{dp}={train_per_gpu} is not divisible by the per-GPU mini batch {mini_per_gpu}",
                    "make train*n and mini*n multiples of the policy data-parallel size",
                    per_gpu_train=train_per_gpu,
                    per_gpu_mini=mini_per_gpu,
                )
            )
    if geo.use_reference:
        lcm = geo.lcm_dp()
        if lcm is not None and train * n < lcm:
            out.append(
                violation(
                    "batch.reference_lcm",
                    ["role_plan.train_batch_size", "role_plan.n_samples_per_prompt"],
                    f"with a reference model train_batch_size*n_samples_per_prompt={train * n} must be at least lcm(policy dp {dp}, reference dp {geo.ref_dp})={lcm}",
                    f"raise train_batch_size*n to at least {lcm}",
                    train_times_n=train * n,
                    lcm=lcm,
                )
            )
    stride = geo.tail_stride()
    if stride is not None and train % stride:
        out.append(
            violation(
                "batch.tail_stride",
                ["role_plan.train_batch_size", "role_plan.n_samples_per_prompt"],
                f"SkyRL trims each generated batch to a multiple of lcm_dp/gcd(lcm_dp, n) = {stride} prompts; train_batch_size={train} is not one, so the first batch is truncated or emptied after generation (SkyRL #1609)",
                f"make train_batch_size a multiple of {stride}",
                train=train,
                stride=stride,
            )
        )
    return out


def strategy_sizes(geo: Geometry, composed: Mapping[str, Any]) -> list[Violation]:
    """Megatron's model-parallel sizes of both roles are positive integers (ETP may stay null)."""
    if geo.strategy != "megatron":
        return []
    out = []
    for role in ("policy", "ref"):
        for name in MEGATRON_SIZES:
            key = f"trainer.{role}.megatron_config.{name}"
            value = get_path(composed, key, 1)
            if value is None and name == "expert_tensor_parallel_size":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                out.append(
                    violation(
                        "strategy.megatron_non_positive",
                        [f"config_yaml.{key}"],
                        f"Megatron {role} {name}={value!r} must be a positive integer",
                        f"set {key} to a positive integer (1: no parallelism of that kind)",
                        value=value,
                    )
                )
    return out


def strategy_divisibility(geo: Geometry, composed: Mapping[str, Any]) -> list[Violation]:
    out = []
    world = geo.policy_world
    if geo.strategy == "megatron":
        tp, pp, cp = geo.megatron_policy
        if world % (tp * pp * cp):
            out.append(
                violation(
                    "strategy.megatron_world",
                    ["config_yaml.trainer.policy.megatron_config"],
                    f"Megatron policy world size {world} must be divisible by TP*PP*CP={tp}*{pp}*{cp}={tp * pp * cp}",
                    f"choose Megatron TP*PP*CP among the divisors of {world}: {divisor_hint(world)}",
                    world=world,
                    model_parallel=tp * pp * cp,
                )
            )
        ep = get_path(composed, "trainer.policy.megatron_config.expert_model_parallel_size")
        etp = get_path(composed, "trainer.policy.megatron_config.expert_tensor_parallel_size") or tp
        if world % (pp * ep * etp):
            out.append(
                violation(
                    "strategy.megatron_expert",
                    ["config_yaml.trainer.policy.megatron_config.expert_model_parallel_size"],
                    f"Megatron policy world size {world} must be divisible by PP*EP*ETP={pp}*{ep}*{etp}",
                    "choose EP and ETP so PP*EP*ETP divides the policy world size",
                    world=world,
                    expert_parallel=pp * ep * etp,
                )
            )
        if geo.policy_sp != 1:
            out.append(
                violation(
                    "strategy.megatron_sequence_parallel",
                    ["config_yaml.trainer.policy.sequence_parallel_size"],
                    f"trainer.policy.sequence_parallel_size={geo.policy_sp} must be 1 under Megatron (use context_parallel_size)",
                    "set trainer.policy.sequence_parallel_size: 1",
                    value=geo.policy_sp,
                )
            )
        if cp > 1 and not get_path(composed, "trainer.remove_microbatch_padding"):
            out.append(
                violation(
                    "strategy.megatron_context_parallel",
                    ["config_yaml.trainer.remove_microbatch_padding"],
                    f"Megatron context_parallel_size={cp} needs trainer.remove_microbatch_padding: true",
                    "set trainer.remove_microbatch_padding: true",
                    cp=cp,
                )
            )
    else:
        for role, sp, role_world in (("policy", geo.policy_sp, world), ("ref", geo.ref_sp, geo.ref_world)):
            if sp <= 0 or role_world % sp:
                out.append(
                    violation(
                        "strategy.sequence_parallel",
                        [f"config_yaml.trainer.{role}.sequence_parallel_size"],
                        f"trainer.{role}.sequence_parallel_size={sp} must divide the {role} world size {role_world}",
                        f"choose sequence_parallel_size among the divisors of {role_world}: {divisor_hint(role_world)}",
                        sp=sp,
                        world=role_world,
                    )
                )
    return out
