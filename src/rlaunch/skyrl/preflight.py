"""The preflight: every deterministic mistake in a role plan and recipe, before submission.

`check_plan` is pure (no I/O) and returns every violation it finds. It covers the launcher's own
topology arithmetic (exact GPU budget, engines that never straddle a node, colocated slices),
everything upstream SkyRL's `validate_cfg` would refuse only after GPUs are allocated (batch
divisibility per data-parallel rank, the reference-model lcm rule, Megatron and Ulysses
divisibility, fully-async rules), the tail-trim stride that empties the first batch (SkyRL
#1609), the runtime's capabilities, and the explicitness a reviewer expects (token budget,
checkpoint and resume policy, W&B identity).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rlaunch.launch_config.geometry import FULLY_ASYNC, Geometry
from rlaunch.launch_config.recipe import RecipeProblem, compose, get_path, has_path
from rlaunch.runtimes.registry import RuntimeProfile, get_profile, unsupported_settings
from rlaunch.skyrl.errors import PreflightError
from rlaunch.skyrl.recipe import (
    FULLY_ASYNC_ENABLED_KEY,
    entrypoint_of,
    launcher_owned,
    plan_disagreements,
    render_recipe,
)
from rlaunch.skyrl.role_plan import SkyRLRolePlan, SkyRLTopology
from rlaunch.skyrl.sources import ModelFacts

ROLLOUT_LOGPROB_LOSSES = ("rollout_is", "dppo", "cispo")
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


def _v(code: str, fields: list[str], message: str, fix: str, **values: Any) -> PreflightError:
    return PreflightError(code, fields, message, fix, values)


def check_plan(
    topology: SkyRLTopology,
    recipe: Mapping[str, Any],
    profile: str | RuntimeProfile,
    *,
    seed: int | None = None,
    model: ModelFacts | None = None,
) -> list[PreflightError]:
    """Every violation of `topology` + `recipe` (the sparse SkyRL recipe) for `profile`; [] when valid."""
    prof = profile if isinstance(profile, RuntimeProfile) else get_profile(profile)
    plan = topology.role_plan
    out: list[PreflightError] = []
    out += _structure(topology)
    out += plan_disagreements(recipe, plan, seed)
    out += launcher_owned(recipe)
    out += _explicitness(recipe)
    base = prof.base_config()
    try:
        rendered = render_recipe(recipe, plan, prof, seed if seed is not None else 0)
    except ValueError as exc:
        # A section the role plan renders into is not a mapping: report it and every other
        # unknown key or type mismatch of the recipe as written, each by its path.
        _, problems = compose(base, recipe)
        out += [_recipe_problem(p) for p in problems]
        if not problems:
            out.append(
                _v("recipe.not_mapping", ["config_yaml"], str(exc), "make every section of the recipe a mapping")
            )
        return out
    composed, problems = compose(base, rendered)
    out += [_recipe_problem(p) for p in problems]
    if problems:
        return out  # derived numbers need a well-typed recipe
    geometry = Geometry.from_recipe(composed)
    positive = not _structure(topology)
    if positive:
        out += _topology(topology)
        out += _batches(plan, geometry, composed)
    out += _entrypoint(recipe, prof, geometry, composed)
    out += _runtime(topology, prof, composed)
    out += _recipe_rules(composed)
    out += _wandb_project(recipe, composed)
    if positive:
        out += _model(model, plan, composed)
    return out


def _recipe_problem(p: RecipeProblem) -> PreflightError:
    return PreflightError(p.code, [f"config_yaml.{p.path}"], p.message, p.fix, {"value": p.value})


def _structure(topology: SkyRLTopology) -> list[PreflightError]:
    out = []
    for name in ("num_nodes", "gpus_per_node"):
        value = getattr(topology, name)
        if value <= 0:
            out.append(
                _v(
                    "topology.non_positive",
                    [f"topology.{name}"],
                    f"SkyRL topology {name}={value} must be positive",
                    f"set topology.{name} to a positive count",
                    value=value,
                )
            )
    plan = topology.role_plan
    for name in SkyRLRolePlan.__dataclass_fields__:
        value = getattr(plan, name)
        if name != "colocate_all" and value <= 0:
            out.append(
                _v(
                    "role_plan.non_positive",
                    [f"role_plan.{name}"],
                    f"SkyRL role plan {name}={value} must be positive",
                    f"set role_plan.{name} to a positive integer",
                    value=value,
                )
            )
    return out


def _topology(t: SkyRLTopology) -> list[PreflightError]:
    p = t.role_plan
    n, g = t.num_nodes, t.gpus_per_node
    tp, pp, dp, ep = (
        p.inference_engine_tensor_parallel_size,
        p.inference_engine_pipeline_parallel_size,
        p.inference_engine_data_parallel_size,
        p.inference_engine_expert_parallel_size,
    )
    out = []
    if p.policy_num_nodes > n:
        out.append(
            _v(
                "role_plan.policy_nodes_exceed_topology",
                ["role_plan.policy_num_nodes", "topology.num_nodes"],
                f"policy_num_nodes={p.policy_num_nodes} exceeds the allocated topology of {n} node(s)",
                "lower policy_num_nodes or allocate more nodes",
                policy_num_nodes=p.policy_num_nodes,
                num_nodes=n,
            )
        )
    if p.policy_num_gpus_per_node > g:
        out.append(
            _v(
                "role_plan.policy_gpus_exceed_node",
                ["role_plan.policy_num_gpus_per_node", "topology.gpus_per_node"],
                f"policy_num_gpus_per_node={p.policy_num_gpus_per_node} exceeds the {g} GPUs on one allocated node",
                "lower policy_num_gpus_per_node to the node width",
                policy_num_gpus_per_node=p.policy_num_gpus_per_node,
                gpus_per_node=g,
            )
        )
    elif p.policy_num_gpus_per_node != g:
        out.append(
            _v(
                "role_plan.policy_width_mismatch",
                ["role_plan.policy_num_gpus_per_node", "topology.gpus_per_node"],
                f"policy_num_gpus_per_node={p.policy_num_gpus_per_node} must match the whole-node topology width gpus_per_node={g}",
                f"set policy_num_gpus_per_node={g} (policy nodes are whole nodes)",
                policy_num_gpus_per_node=p.policy_num_gpus_per_node,
                gpus_per_node=g,
            )
        )
    slice_, ranks = tp * pp, tp * pp * dp
    engine_desc = f"{p.num_inference_engines} engines x TP{tp} x PP{pp} x DP{dp}"
    if p.colocate_all:
        if g % slice_:
            out.append(
                _v(
                    "engine.colocated_slice",
                    [
                        "role_plan.inference_engine_tensor_parallel_size",
                        "role_plan.inference_engine_pipeline_parallel_size",
                    ],
                    f"each colocated inference engine TP*PP slice must divide gpus_per_node; got TP*PP={slice_} and gpus_per_node={g}",
                    f"choose TP*PP among the divisors of {g}: {_divisors(g)}",
                    slice=slice_,
                    gpus_per_node=g,
                )
            )
        if p.rollout_gpus != p.policy_gpus:
            out.append(
                _v(
                    "engine.colocated_gpu_mismatch",
                    ["role_plan.num_inference_engines", "role_plan.inference_engine_data_parallel_size"],
                    f"colocated roles must use the same GPUs: policy={p.policy_gpus}, rollout={p.rollout_gpus} ({engine_desc})",
                    f"make engines x TP x PP x DP equal {p.policy_gpus}",
                    policy=p.policy_gpus,
                    rollout=p.rollout_gpus,
                )
            )
    else:
        if ranks > g:
            out.append(
                _v(
                    "engine.exceeds_node",
                    [
                        "role_plan.inference_engine_tensor_parallel_size",
                        "role_plan.inference_engine_pipeline_parallel_size",
                        "role_plan.inference_engine_data_parallel_size",
                    ],
                    f"each inference engine must fit on one node, but TP*PP*DP={ranks} exceeds gpus_per_node={g}",
                    "lower TP, PP or DP so one engine fits a node (use more engines instead)",
                    engine_gpus=ranks,
                    gpus_per_node=g,
                )
            )
        else:
            free_nodes = n - p.policy_num_nodes
            needed = math.ceil(p.num_inference_engines / (g // ranks))
            if needed > free_nodes and p.planned_gpus == t.allocated_gpus:
                out.append(
                    _v(
                        "engine.rollout_packing",
                        ["role_plan.num_inference_engines"],
                        f"{p.num_inference_engines} engines of {ranks} GPUs need {needed} whole node(s) (engines never straddle nodes) but {free_nodes} remain after the policy",
                        f"make each engine's TP*PP*DP divide {g}",
                        needed_nodes=needed,
                        free_nodes=free_nodes,
                    )
                )
    if (tp * dp) % ep:
        out.append(
            _v(
                "engine.expert_parallel",
                ["role_plan.inference_engine_expert_parallel_size"],
                f"inference engine TP*DP={tp * dp} must be divisible by expert parallel size EP={ep}",
                f"choose EP among the divisors of {tp * dp}: {_divisors(tp * dp)}",
                tp_times_dp=tp * dp,
                ep=ep,
            )
        )
    elif ep > 1 and ep != tp * dp:
        out.append(
            _v(
                "engine.expert_parallel_skyrl",
                ["role_plan.inference_engine_expert_parallel_size"],
                f"SkyRL requires EP == TP*DP when EP > 1; got EP={ep}, TP*DP={tp * dp}",
                f"set EP={tp * dp} or EP=1",
                tp_times_dp=tp * dp,
                ep=ep,
            )
        )
    if p.planned_gpus != t.allocated_gpus:
        parts = f"policy {p.policy_gpus}" + ("" if p.colocate_all else f" + rollout {p.rollout_gpus} = {engine_desc}")
        out.append(
            _v(
                "topology.gpu_budget",
                ["role_plan", "topology.num_nodes", "topology.gpus_per_node"],
                f"role plan describes {p.planned_gpus} GPUs ({parts}) but the topology allocates {t.allocated_gpus} ({n} nodes x {g})",
                "make the role plan consume the allocation exactly: change engines/DP or the policy footprint, or the topology",
                planned=p.planned_gpus,
                allocated=t.allocated_gpus,
            )
        )
    return out


def _batches(p: SkyRLRolePlan, geo: Geometry, composed: Mapping[str, Any]) -> list[PreflightError]:
    train, mini, micro, n = (
        p.train_batch_size,
        p.policy_mini_batch_size,
        p.micro_train_batch_size_per_gpu,
        p.n_samples_per_prompt,
    )
    out = []
    if train % mini:
        out.append(
            _v(
                "batch.train_mini",
                ["role_plan.train_batch_size", "role_plan.policy_mini_batch_size"],
                f"train_batch_size={train} must be divisible by policy_mini_batch_size={mini}",
                f"choose a mini batch among the divisors of {train}: {_divisors(train)}",
                train=train,
                mini=mini,
            )
        )
    if mini % micro:
        out.append(
            _v(
                "batch.mini_micro",
                ["role_plan.policy_mini_batch_size", "role_plan.micro_train_batch_size_per_gpu"],
                f"policy_mini_batch_size={mini} must be divisible by micro_train_batch_size_per_gpu={micro}",
                f"choose a micro batch among the divisors of {mini}: {_divisors(mini)}",
                mini=mini,
                micro=micro,
            )
        )
    micro_forward = get_path(composed, "trainer.micro_forward_batch_size_per_gpu")
    if micro_forward <= 0:
        out.append(
            _v(
                "batch.micro_forward",
                ["config_yaml.trainer.micro_forward_batch_size_per_gpu"],
                f"micro_forward_batch_size_per_gpu={micro_forward} must be positive",
                "set it to a positive integer",
                value=micro_forward,
            )
        )
    out += _strategy_divisibility(geo, composed)
    dp = geo.policy_dp
    if dp is None:
        return out
    mini_per_gpu = geo.per_gpu_mini(dp)
    if mini_per_gpu <= 0:
        out.append(
            _v(
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
                _v(
                    "batch.per_gpu_mini_micro",
                    ["role_plan.micro_train_batch_size_per_gpu"],
                    f"per-GPU mini batch {mini}*{n}//{dp}={mini_per_gpu} is not divisible by micro_train_batch_size_per_gpu={micro}",
                    f"choose a micro batch among the divisors of {mini_per_gpu}: {_divisors(mini_per_gpu)}",
                    per_gpu_mini=mini_per_gpu,
                    micro=micro,
                )
            )
        train_per_gpu = geo.per_gpu_train(dp)
        if train_per_gpu % mini_per_gpu:
            out.append(
                _v(
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
                _v(
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
            _v(
                "batch.tail_stride",
                ["role_plan.train_batch_size", "role_plan.n_samples_per_prompt"],
                f"SkyRL trims each generated batch to a multiple of lcm_dp/gcd(lcm_dp, n) = {stride} prompts; train_batch_size={train} is not one, so the first batch is truncated or emptied after generation (SkyRL #1609)",
                f"make train_batch_size a multiple of {stride}",
                train=train,
                stride=stride,
            )
        )
    return out


def _strategy_divisibility(geo: Geometry, composed: Mapping[str, Any]) -> list[PreflightError]:
    out = []
    world = geo.policy_world
    if geo.strategy == "megatron":
        tp, pp, cp = geo.megatron_policy
        if world % (tp * pp * cp):
            out.append(
                _v(
                    "strategy.megatron_world",
                    ["config_yaml.trainer.policy.megatron_config"],
                    f"Megatron policy world size {world} must be divisible by TP*PP*CP={tp}*{pp}*{cp}={tp * pp * cp}",
                    f"choose Megatron TP*PP*CP among the divisors of {world}: {_divisors(world)}",
                    world=world,
                    model_parallel=tp * pp * cp,
                )
            )
        ep = get_path(composed, "trainer.policy.megatron_config.expert_model_parallel_size")
        etp = get_path(composed, "trainer.policy.megatron_config.expert_tensor_parallel_size") or tp
        if world % (pp * ep * etp):
            out.append(
                _v(
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
                _v(
                    "strategy.megatron_sequence_parallel",
                    ["config_yaml.trainer.policy.sequence_parallel_size"],
                    f"trainer.policy.sequence_parallel_size={geo.policy_sp} must be 1 under Megatron (use context_parallel_size)",
                    "set trainer.policy.sequence_parallel_size: 1",
                    value=geo.policy_sp,
                )
            )
        if cp > 1 and not get_path(composed, "trainer.remove_microbatch_padding"):
            out.append(
                _v(
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
                    _v(
                        "strategy.sequence_parallel",
                        [f"config_yaml.trainer.{role}.sequence_parallel_size"],
                        f"trainer.{role}.sequence_parallel_size={sp} must divide the {role} world size {role_world}",
                        f"choose sequence_parallel_size among the divisors of {role_world}: {_divisors(role_world)}",
                        sp=sp,
                        world=role_world,
                    )
                )
    return out


def _entrypoint(
    recipe: Mapping[str, Any], prof: RuntimeProfile, geo: Geometry, composed: Mapping[str, Any]
) -> list[PreflightError]:
    entry = entrypoint_of(recipe)
    if not isinstance(entry, str) or entry not in prof.entrypoints:
        return [
            _v(
                "entrypoint.unknown",
                ["config_yaml.entrypoint"],
                f"entrypoint {entry!r} is not registered for runtime {prof.name!r}",
                f"choose one of {sorted(prof.entrypoints)}",
                value=entry,
            )
        ]
    out = []
    enabled = get_path(recipe, FULLY_ASYNC_ENABLED_KEY, None)
    if enabled is not None and enabled is not (entry == FULLY_ASYNC):
        out.append(
            _v(
                "entrypoint.fully_async_enabled",
                [f"config_yaml.{FULLY_ASYNC_ENABLED_KEY}"],
                f"{FULLY_ASYNC_ENABLED_KEY}={enabled!r} contradicts entrypoint {entry!r} (the flag is rendered from the entrypoint)",
                f"remove {FULLY_ASYNC_ENABLED_KEY} from config_yaml; choose the trainer with `entrypoint: fully_async` or `standard`",
                value=enabled,
                entrypoint=entry,
            )
        )
    if entry != FULLY_ASYNC:
        return out
    if geo.train_batch != geo.mini_batch:
        out.append(
            _v(
                "entrypoint.fully_async_batch",
                ["role_plan.train_batch_size", "role_plan.policy_mini_batch_size"],
                f"SkyRL fully_async entrypoint requires train_batch_size == policy_mini_batch_size; got {geo.train_batch} and {geo.mini_batch}",
                "set train_batch_size equal to policy_mini_batch_size",
                train=geo.train_batch,
                mini=geo.mini_batch,
            )
        )
    if geo.colocate_all:
        out.append(
            _v(
                "entrypoint.fully_async_colocated",
                ["role_plan.colocate_all"],
                "SkyRL fully_async needs disaggregated roles; colocate_all is true",
                "set colocate_all=False and give rollout its own GPUs",
                colocate_all=True,
            )
        )
    workers = get_path(composed, "trainer.fully_async.num_parallel_generation_workers")
    staleness = get_path(composed, "trainer.fully_async.max_staleness_steps")
    if not geo.mini_batch <= workers <= geo.mini_batch * (staleness + 1):
        out.append(
            _v(
                "entrypoint.fully_async_workers",
                ["config_yaml.trainer.fully_async.num_parallel_generation_workers"],
                f"fully_async needs policy_mini_batch_size <= num_parallel_generation_workers <= mini*(max_staleness_steps+1); got {geo.mini_batch} <= {workers} <= {geo.mini_batch * (staleness + 1)}",
                f"set num_parallel_generation_workers between {geo.mini_batch} and {geo.mini_batch * (staleness + 1)}",
                workers=workers,
            )
        )
    loss = get_path(composed, "trainer.algorithm.policy_loss_type")
    if loss not in ROLLOUT_LOGPROB_LOSSES:
        out.append(
            _v(
                "entrypoint.fully_async_policy_loss",
                ["config_yaml.trainer.algorithm.policy_loss_type"],
                f"fully_async trains on stale rollouts and needs a policy loss anchored on rollout log-probs; got {loss!r}",
                f"set trainer.algorithm.policy_loss_type to one of {list(ROLLOUT_LOGPROB_LOSSES)}",
                value=loss,
            )
        )
    if get_path(composed, "generator.batched"):
        out.append(
            _v(
                "entrypoint.fully_async_batched",
                ["config_yaml.generator.batched"],
                "fully_async needs generator.batched: false",
                "set generator.batched: false",
                value=True,
            )
        )
    return out


def _runtime(t: SkyRLTopology, prof: RuntimeProfile, composed: Mapping[str, Any]) -> list[PreflightError]:
    out = []
    strategy = get_path(composed, "trainer.strategy")
    if strategy != prof.strategy:
        out.append(
            _v(
                "runtime.strategy_mismatch",
                ["runtime.profile", "config_yaml.trainer.strategy"],
                f"runtime profile {prof.name!r} runs the {prof.strategy!r} strategy, but config_yaml asks for trainer.strategy={strategy!r}",
                f"drop trainer.strategy from the recipe or choose the runtime profile that runs {strategy!r}",
                profile=prof.name,
                strategy=strategy,
            )
        )
    caps = prof.capabilities
    p = t.role_plan
    is_cpu = t.gpu_variant.lower() == "cpu"
    if (caps.accelerator == "cpu") != is_cpu:
        want = "'cpu' (device slots are CPU processes)" if caps.accelerator == "cpu" else "a GPU model such as 'H100'"
        out.append(
            _v(
                "runtime.accelerator",
                ["topology.gpu_variant"],
                f"runtime {prof.name!r} runs on {caps.accelerator.upper()} but topology.gpu_variant={t.gpu_variant!r}",
                f"set gpu_variant to {want}",
                gpu_variant=t.gpu_variant,
            )
        )
    if not p.colocate_all and not caps.disaggregated:
        out.append(
            _v(
                "runtime.capability",
                ["role_plan.colocate_all"],
                f"runtime {prof.name!r} supports only colocated roles",
                "set colocate_all=True or use a SkyRL GPU runtime",
                colocate_all=False,
            )
        )
    if p.colocate_all and not caps.colocated:
        out.append(
            _v(
                "runtime.capability",
                ["role_plan.colocate_all"],
                f"runtime {prof.name!r} supports only disaggregated roles",
                "set colocate_all=False",
                colocate_all=True,
            )
        )
    limits = (
        ("inference_engine_tensor_parallel_size", caps.max_inference_tensor_parallel, "TP"),
        ("inference_engine_pipeline_parallel_size", caps.max_inference_pipeline_parallel, "PP"),
    )
    for field_name, limit, label in limits:
        value = getattr(p, field_name)
        if limit is not None and value > limit:
            out.append(
                _v(
                    "runtime.capability",
                    [f"role_plan.{field_name}"],
                    f"runtime {prof.name!r} supports inference {label} up to {limit}; got {value}",
                    f"set {field_name}={limit}",
                    value=value,
                )
            )
    if caps.max_nodes is not None and t.num_nodes > caps.max_nodes:
        out.append(
            _v(
                "runtime.capability",
                ["topology.num_nodes"],
                f"runtime {prof.name!r} runs on at most {caps.max_nodes} node(s); got {t.num_nodes}",
                f"set num_nodes={caps.max_nodes}",
                value=t.num_nodes,
            )
        )
    restricted = caps.honoured_keys is not None or bool(caps.allowed_values)
    settings = unsupported_settings(prof, composed) if restricted else []
    for key, value, reason in settings:
        out.append(
            _v(
                "runtime.unsupported_setting",
                [f"config_yaml.{key}"],
                f"runtime {prof.name!r} cannot honour {key}={value!r}: {reason}",
                f"remove {key} from the recipe or use a runtime that supports it",
                value=value,
            )
        )
    return out


def _recipe_rules(c: Mapping[str, Any]) -> list[PreflightError]:
    g = lambda key: get_path(c, key)  # noqa: E731
    out = []
    if g("trainer.critic.model.path"):
        out.append(
            _v(
                "recipe.critic",
                ["config_yaml.trainer.critic.model.path"],
                "the role plan does not describe a separate critic role",
                "remove trainer.critic.model.path (critic-free estimators such as grpo need none)",
                value=g("trainer.critic.model.path"),
            )
        )
    if g("trainer.algorithm.use_kl_loss") and g("trainer.algorithm.use_kl_in_reward"):
        out.append(
            _v(
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
            _v(
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
            _v(
                "recipe.max_training_steps",
                ["config_yaml.trainer.max_training_steps"],
                f"trainer.max_training_steps={steps!r} must be a positive integer when set",
                "set it to a positive integer or remove it",
                value=steps,
            )
        )
    if g("trainer.resume_mode") not in ("none", "latest", None):
        out.append(
            _v(
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
            _v(
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
                _v(
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
            _v(
                "recipe.external_engines",
                ["config_yaml.generator.inference_engine.external_server_urls"],
                "the role plan describes local engines; external inference servers are not part of it",
                "remove the external URLs",
                value=True,
            )
        )
    if g("generator.inference_engine.distributed_executor_backend") not in ("ray", "mp"):
        out.append(
            _v(
                "recipe.executor_backend",
                ["config_yaml.generator.inference_engine.distributed_executor_backend"],
                f"distributed_executor_backend must be ray or mp; got {g('generator.inference_engine.distributed_executor_backend')!r}",
                "use ray (may span nodes) or mp (one node)",
                value=g("generator.inference_engine.distributed_executor_backend"),
            )
        )
    return out


def _wandb_project(recipe: Mapping[str, Any], composed: Mapping[str, Any]) -> list[PreflightError]:
    if get_path(composed, "trainer.logger") != "wandb" or has_path(recipe, "trainer.project_name"):
        return []
    return [
        _v(
            "explicit.wandb_project",
            ["config_yaml.trainer.project_name"],
            "trainer.logger is wandb but config_yaml does not name trainer.project_name",
            "set trainer.project_name explicitly (or use logger: console)",
        )
    ]


def _explicitness(recipe: Mapping[str, Any]) -> list[PreflightError]:
    return [
        _v(
            code,
            [f"config_yaml.{key}"],
            f"{key} is not set explicitly; it decides {what}",
            f"set {key} in config_yaml instead of relying on the trainer default",
        )
        for key, (code, what) in EXPLICIT_KEYS.items()
        if not has_path(recipe, key)
    ]


def _model(model: ModelFacts | None, p: SkyRLRolePlan, c: Mapping[str, Any]) -> list[PreflightError]:
    if model is None:
        return []
    out = []
    heads, tp = model.num_attention_heads, p.inference_engine_tensor_parallel_size
    if heads and heads % tp:
        out.append(
            _v(
                "model.tp_heads",
                ["role_plan.inference_engine_tensor_parallel_size"],
                f"inference TP={tp} must divide the model's {heads} attention heads",
                f"choose TP among {_divisors(heads)}",
                heads=heads,
                tp=tp,
            )
        )
    context = model.context_length
    budget = get_path(c, "trainer.max_prompt_length") + get_path(c, "generator.sampling_params.max_generate_length")
    if context and budget > context:
        out.append(
            _v(
                "model.context_budget",
                ["config_yaml.trainer.max_prompt_length", "config_yaml.generator.sampling_params.max_generate_length"],
                f"max_prompt_length + max_generate_length = {budget} exceeds the model's context length {context}",
                f"shrink the token budget to at most {context}",
                budget=budget,
                context_length=context,
            )
        )
    return out


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0] if n > 0 else []
