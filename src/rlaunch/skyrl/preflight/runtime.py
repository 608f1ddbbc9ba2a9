"""Runtime rules: registered entrypoint (and fully-async's own rules), strategy, capabilities and
settings the runtime cannot honour."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlaunch.launch_config.geometry import FULLY_ASYNC, Geometry
from rlaunch.launch_config.recipe import get_path
from rlaunch.runtimes.registry import RuntimeProfile, unsupported_settings
from rlaunch.skyrl.errors import PreflightError
from rlaunch.skyrl.preflight.common import violation
from rlaunch.skyrl.recipe import FULLY_ASYNC_ENABLED_KEY, entrypoint_of
from rlaunch.skyrl.role_plan import SkyRLTopology

ROLLOUT_LOGPROB_LOSSES = ("rollout_is", "dppo", "cispo")


def entrypoint_rules(
    recipe: Mapping[str, Any], prof: RuntimeProfile, geo: Geometry, composed: Mapping[str, Any]
) -> list[PreflightError]:
    entry = entrypoint_of(recipe)
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
    enabled = get_path(recipe, FULLY_ASYNC_ENABLED_KEY, None)
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
    workers = get_path(composed, "trainer.fully_async.num_parallel_generation_workers")
    staleness = get_path(composed, "trainer.fully_async.max_staleness_steps")
    if not geo.mini_batch <= workers <= geo.mini_batch * (staleness + 1):
        out.append(
            violation(
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
            violation(
                "entrypoint.fully_async_policy_loss",
                ["config_yaml.trainer.algorithm.policy_loss_type"],
                f"fully_async trains on stale rollouts and needs a policy loss anchored on rollout log-probs; got {loss!r}",
                f"set trainer.algorithm.policy_loss_type to one of {list(ROLLOUT_LOGPROB_LOSSES)}",
                value=loss,
            )
        )
    if get_path(composed, "generator.batched"):
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


def runtime_rules(t: SkyRLTopology, prof: RuntimeProfile, composed: Mapping[str, Any]) -> list[PreflightError]:
    out = []
    strategy = get_path(composed, "trainer.strategy")
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
    p = t.role_plan
    is_cpu = t.gpu_variant.lower() == "cpu"
    if (caps.accelerator == "cpu") != is_cpu:
        want = "'cpu' (device slots are CPU processes)" if caps.accelerator == "cpu" else "a GPU model such as 'H100'"
        out.append(
            violation(
                "runtime.accelerator",
                ["topology.gpu_variant"],
                f"runtime {prof.name!r} runs on {caps.accelerator.upper()} but topology.gpu_variant={t.gpu_variant!r}",
                f"set gpu_variant to {want}",
                gpu_variant=t.gpu_variant,
            )
        )
    if not p.colocate_all and not caps.disaggregated:
        out.append(
            violation(
                "runtime.capability",
                ["role_plan.colocate_all"],
                f"runtime {prof.name!r} supports only colocated roles",
                "set colocate_all=True or use a SkyRL GPU runtime",
                colocate_all=False,
            )
        )
    if p.colocate_all and not caps.colocated:
        out.append(
            violation(
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
                violation(
                    "runtime.capability",
                    [f"role_plan.{field_name}"],
                    f"runtime {prof.name!r} supports inference {label} up to {limit}; got {value}",
                    f"set {field_name}={limit}",
                    value=value,
                )
            )
    if caps.max_nodes is not None and t.num_nodes > caps.max_nodes:
        out.append(
            violation(
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
            violation(
                "runtime.unsupported_setting",
                [f"config_yaml.{key}"],
                f"runtime {prof.name!r} cannot honour {key}={value!r}: {reason}",
                f"remove {key} from the recipe or use a runtime that supports it",
                value=value,
            )
        )
    return out
