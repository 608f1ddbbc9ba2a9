"""Runtime rules: the installed runtime, its registered entrypoint (and fully-async's own rules),
strategy, capabilities and the settings it cannot honour."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.geometry import FULLY_ASYNC, FULLY_ASYNC_ENABLED_KEY, Geometry
from rlaunch.launch_config.recipe_keys import ALGORITHM, ASYNC_TRAINER, GENERATOR, TRAINER
from rlaunch.rules.subject import Subject, Violation, violation
from rlaunch.runtimes.registry import unsupported_settings

CODES = (
    "runtime.source_digest",
    "entrypoint.unknown",
    "entrypoint.fully_async_enabled",
    "entrypoint.fully_async_batch",
    "entrypoint.fully_async_colocated",
    "entrypoint.fully_async_workers",
    "entrypoint.fully_async_policy_loss",
    "entrypoint.fully_async_batched",
    "runtime.strategy_mismatch",
    "runtime.accelerator",
    "runtime.capability",
    "runtime.unsupported_setting",
)

ROLLOUT_LOGPROB_LOSSES = ("rollout_is", "dppo", "cispo")


def source_digest(s: Subject) -> list[Violation]:
    """A document names the runtime digest it was rendered against; it must be the installed one."""
    if s.source_digest is None:
        return []
    installed = s.profile.source_digest
    if s.source_digest == installed:
        return []
    return [
        violation(
            "runtime.source_digest",
            ["runtime.source_digest"],
            f"runtime.source_digest={s.source_digest[:16]} does not match runtime {s.profile.name!r} installed here ({installed[:16]})",
            "render the document with this rlaunch (a fresh RL version)",
            document=s.source_digest,
            installed=installed,
        )
    ]


def entrypoint_rules(s: Subject, geo: Geometry, composed: Mapping[str, Any]) -> list[Violation]:
    prof, entry = s.profile, s.entrypoint
    if not isinstance(entry, str) or entry not in prof.entrypoints:
        return [
            violation(
                "entrypoint.unknown",
                ["config_yaml.entrypoint"],
                f"entrypoint {entry!r} is not registered for runtime {prof.name!r}",
                f"choose one of {sorted(prof.entrypoints)}",
                value=entry,
            )
        ]
    out = []
    enabled = get_path(s.recipe, FULLY_ASYNC_ENABLED_KEY, None)
    if enabled is not None and enabled is not (entry == FULLY_ASYNC):
        out.append(
            violation(
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
            violation(
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
            violation(
                "entrypoint.fully_async_colocated",
                ["role_plan.colocate_all"],
                "SkyRL fully_async needs disaggregated roles; colocate_all is true",
                "set colocate_all=False and give rollout its own GPUs",
                colocate_all=True,
            )
        )
    workers = get_path(composed, ASYNC_TRAINER.NUM_PARALLEL_GENERATION_WORKERS)
    staleness = get_path(composed, ASYNC_TRAINER.MAX_STALENESS_STEPS)
    most = geo.mini_batch * (staleness + 1)
    if not geo.mini_batch <= workers <= most:
        out.append(
            violation(
                "entrypoint.fully_async_workers",
                ["config_yaml.trainer.fully_async.num_parallel_generation_workers"],
                f"fully_async needs policy_mini_batch_size <= num_parallel_generation_workers <= mini*(max_staleness_steps+1); got {geo.mini_batch} <= {workers} <= {most}",
                f"set num_parallel_generation_workers between {geo.mini_batch} and {most}",
                workers=workers,
                least=geo.mini_batch,
                most=most,
            )
        )
    loss = get_path(composed, ALGORITHM.POLICY_LOSS_TYPE)
    if loss not in ROLLOUT_LOGPROB_LOSSES:
        out.append(
            violation(
                "entrypoint.fully_async_policy_loss",
                ["config_yaml.trainer.algorithm.policy_loss_type"],
                f"fully_async trains on stale rollouts and needs a policy loss anchored on rollout log-probs; got {loss!r}",
                f"set trainer.algorithm.policy_loss_type to one of {list(ROLLOUT_LOGPROB_LOSSES)}",
                value=loss,
            )
        )
    if get_path(composed, GENERATOR.BATCHED):
        out.append(
            violation(
                "entrypoint.fully_async_batched",
                ["config_yaml.generator.batched"],
                "fully_async needs generator.batched: false",
                "set generator.batched: false",
                value=True,
            )
        )
    return out


def runtime_rules(s: Subject, composed: Mapping[str, Any]) -> list[Violation]:
    prof = s.profile
    out = []
    strategy = get_path(composed, TRAINER.STRATEGY)
    if strategy != prof.strategy:
        out.append(
            violation(
                "runtime.strategy_mismatch",
                ["runtime.profile", "config_yaml.trainer.strategy"],
                f"runtime profile {prof.name!r} runs the {prof.strategy!r} strategy, but config_yaml asks for trainer.strategy={strategy!r}",
                f"drop trainer.strategy from the recipe or choose the runtime profile that runs {strategy!r}",
                profile=prof.name,
                strategy=strategy,
            )
        )
    caps = prof.capabilities
    is_cpu = s.gpu_variant.lower() == "cpu"
    if (caps.accelerator == "cpu") != is_cpu:
        want = "'cpu' (device slots are CPU processes)" if caps.accelerator == "cpu" else "a GPU model such as 'H100'"
        out.append(
            violation(
                "runtime.accelerator",
                ["topology.gpu_variant"],
                f"runtime {prof.name!r} runs on {caps.accelerator.upper()} but topology.gpu_variant={s.gpu_variant!r}",
                f"set gpu_variant to {want}",
                gpu_variant=s.gpu_variant,
            )
        )
    colocated = s.plan["colocate_all"]
    if not colocated and not caps.disaggregated:
        out.append(
            violation(
                "runtime.capability",
                ["role_plan.colocate_all"],
                f"runtime {prof.name!r} supports only colocated roles",
                "set colocate_all=True or use a SkyRL GPU runtime",
                colocate_all=False,
            )
        )
    if colocated and not caps.colocated:
        out.append(
            violation(
                "runtime.capability",
                ["role_plan.colocate_all"],
                f"runtime {prof.name!r} supports only disaggregated roles",
                "set colocate_all=False",
                colocate_all=True,
            )
        )
    if s.reward is not None and not caps.shipped_reward:  # SkyRLSpec refuses it when built; a document here
        out.append(
            violation(
                "runtime.capability",
                ["code.reward"],
                f"code.reward={s.reward!r}: runtime {prof.name!r} does not call a reward function of the shipped "
                "code (capabilities.shipped_reward); its trainer would score with environment.env_class",
                "register an environment with the runtime and name it in environment.env_class, or train on a "
                "runtime that does (trl-cpu)",
                reward=s.reward,
            )
        )
    limits = (
        ("inference_engine_tensor_parallel_size", caps.max_inference_tensor_parallel, "TP"),
        ("inference_engine_pipeline_parallel_size", caps.max_inference_pipeline_parallel, "PP"),
    )
    for field_name, limit, label in limits:
        value = s.plan[field_name]
        if limit is not None and value > limit:
            out.append(
                violation(
                    "runtime.capability",
                    [f"role_plan.{field_name}"],
                    f"runtime {prof.name!r} supports inference {label} up to {limit}; got {value}",
                    f"set {field_name}={limit}",
                    value=value,
                )
            )
    if caps.max_nodes is not None and s.num_nodes > caps.max_nodes:
        out.append(
            violation(
                "runtime.capability",
                ["topology.num_nodes"],
                f"runtime {prof.name!r} runs on at most {caps.max_nodes} node(s); got {s.num_nodes}",
                f"set num_nodes={caps.max_nodes}",
                value=s.num_nodes,
            )
        )
    restricted = caps.honoured_keys is not None or bool(caps.allowed_values)
    settings = unsupported_settings(prof, composed) if restricted else []
    for key, value, reason in settings:
        out.append(
            violation(
                "runtime.unsupported_setting",
                [f"config_yaml.{key}"],
                f"runtime {prof.name!r} cannot honour {key}={value!r}: {reason}",
                f"remove {key} from the recipe or use a runtime that supports it",
                value=value,
            )
        )
    return out
