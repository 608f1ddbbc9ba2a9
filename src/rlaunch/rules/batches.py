"""Batch rules: SkyRL's per-data-parallel-rank divisibility, the reference lcm and the tail stride,
plus the FSDP (Ulysses) and Megatron parallelism the data-parallel size depends on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.geometry import Geometry
from rlaunch.launch_config.recipe_keys import ROLE, TRAINER, role_key
from rlaunch.rules.subject import Violation, divisor_hint, divisors, violation

CODES = (
    "batch.train_mini",
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
        sound = [m for m in divisors(train) if per_gpu_sound(geo, m)]
        out.append(
            violation(
                "batch.train_mini",
                ["role_plan.train_batch_size", "role_plan.policy_mini_batch_size"],
                f"train_batch_size={train} must be divisible by policy_mini_batch_size={mini}",
                f"choose a mini batch among the divisors of {train} that keep the per-GPU batch rules: "
                f"{divisor_hint(train, keep=sound.__contains__)}"
                if sound
                else f"no divisor of {train} keeps the per-GPU batch rules at policy data-parallel size "
                f"{geo.policy_dp} and micro batch {micro}: make train_batch_size*n_samples_per_prompt a multiple "
                f"of {geo.policy_dp}*{micro} (then train_batch_size itself is a mini batch that keeps them)",
                train=train,
                mini=mini,
            )
        )
    micro_forward = get_path(composed, TRAINER.MICRO_FORWARD_BATCH_SIZE_PER_GPU)
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


def per_gpu_sound(geo: Geometry, mini: int) -> bool:
    """Whether a policy mini batch of `mini` keeps the per-GPU rules at this plan's data-parallel size,
    micro batch and samples (a mini batch a fix offers must not break them)."""
    dp = geo.policy_dp
    if not dp or dp <= 0:
        return True  # no data-parallel size to hold it to (another rule says why)
    per_gpu = mini * geo.n_samples // dp
    micro = geo.micro_batch
    return per_gpu > 0 and micro > 0 and per_gpu % micro == 0 and geo.per_gpu_train(dp) % per_gpu == 0


def built_roles(geo: Geometry) -> tuple[str, ...]:
    """The trainer roles SkyRL builds: the policy, and the reference only for a KL term (in the
    loss or the reward); a reference that is never built is never checked (SkyRL's
    `validate_batch_sizes` reads its sizes only then)."""
    return ("policy", "ref") if geo.use_reference else ("policy",)


def strategy_sizes(geo: Geometry, composed: Mapping[str, Any]) -> list[Violation]:
    """Megatron's model-parallel sizes of every built role are positive integers (ETP may stay null)."""
    if geo.strategy != "megatron":
        return []
    out = []
    for role in built_roles(geo):
        for name in MEGATRON_SIZES:
            key = role_key(role, f"{ROLE.MEGATRON_CONFIG}.{name}")
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
    if geo.strategy == "megatron":
        return megatron_rules(geo, composed)
    out = []
    worlds = {"policy": (geo.policy_sp, geo.policy_world), "ref": (geo.ref_sp, geo.ref_world)}
    for role in built_roles(geo):
        sp, role_world = worlds[role]
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


def megatron_rules(geo: Geometry, composed: Mapping[str, Any]) -> list[Violation]:
    """SkyRL's Megatron rules per role: each built role's world against its TP*PP*CP (and the
    launcher's expert rule); Ulysses and context parallelism for the policy AND the reference,
    built or not (`validate_megatron_cfg` checks both roles always)."""
    out = []
    shapes = {"policy": (geo.policy_world, geo.megatron_policy), "ref": (geo.ref_world, geo.megatron_ref)}
    for role in built_roles(geo):
        world, (tp, pp, cp) = shapes[role]
        base = role_key(role, ROLE.MEGATRON_CONFIG)
        if world % (tp * pp * cp):
            out.append(
                violation(
                    "strategy.megatron_world",
                    [f"config_yaml.{base}"],
                    f"Megatron {role} world size {world} must be divisible by TP*PP*CP={tp}*{pp}*{cp}={tp * pp * cp}",
                    f"choose Megatron {role} TP*PP*CP among the divisors of {world}: {divisor_hint(world)}",
                    world=world,
                    model_parallel=tp * pp * cp,
                )
            )
        ep = get_path(composed, role_key(role, ROLE.MEGATRON_EXPERT_PARALLEL))
        etp = get_path(composed, role_key(role, ROLE.MEGATRON_EXPERT_TENSOR_PARALLEL)) or tp
        if world % (pp * ep * etp):
            out.append(
                violation(
                    "strategy.megatron_expert",
                    [f"config_yaml.{base}.expert_model_parallel_size"],
                    f"Megatron {role} world size {world} must be divisible by PP*EP*ETP={pp}*{ep}*{etp}",
                    f"choose EP and ETP so PP*EP*ETP divides the {role} world size",
                    world=world,
                    expert_parallel=pp * ep * etp,
                )
            )
    sequence_parallel = {"policy": geo.policy_sp, "ref": geo.ref_sp}
    for role in ("policy", "ref"):
        sp = sequence_parallel[role]
        if sp != 1:
            out.append(
                violation(
                    "strategy.megatron_sequence_parallel",
                    [f"config_yaml.trainer.{role}.sequence_parallel_size"],
                    f"trainer.{role}.sequence_parallel_size={sp} must be 1 under Megatron (use context_parallel_size)",
                    f"set trainer.{role}.sequence_parallel_size: 1",
                    value=sp,
                )
            )
    context = {role: shapes[role][1][2] for role in ("policy", "ref") if shapes[role][1][2] > 1}
    if context and not get_path(composed, TRAINER.REMOVE_MICROBATCH_PADDING):
        sizes = ", ".join(f"{role} {cp}" for role, cp in context.items())
        out.append(
            violation(
                "strategy.megatron_context_parallel",
                ["config_yaml.trainer.remove_microbatch_padding"]
                + [f"config_yaml.trainer.{role}.megatron_config.context_parallel_size" for role in context],
                f"Megatron context_parallel_size > 1 ({sizes}) needs trainer.remove_microbatch_padding: true",
                "set trainer.remove_microbatch_padding: true",
                **{f"{role}_cp": cp for role, cp in context.items()},
            )
        )
    return out
