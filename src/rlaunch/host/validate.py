"""Re-validate a resolved document at the host: it may have been written by hand.

The allocation must equal what the role plan derives, the profile must run the recipe's
strategy, the entrypoint must be registered, fully_async must have train == mini batch, the
seeds must agree, and the runtime must honour every setting.
"""

from __future__ import annotations

from rlaunch.launch_config.geometry import FULLY_ASYNC, Geometry
from rlaunch.launch_config.recipe import get_path
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.launch_config.typed import DocumentError
from rlaunch.runtimes.registry import get_profile, unsupported_settings


def validate_resolved(doc: SkyRLLaunchConfig) -> Geometry:
    """Every problem of a resolved document at once (DocumentError); returns its geometry."""
    profile = get_profile(doc.runtime.profile)
    skyrl = doc.skyrl
    geo = Geometry.from_recipe(skyrl)
    alloc = doc.cluster.allocation
    problems: list[str] = []
    if doc.runtime.source_digest != profile.source_digest:
        problems.append(
            f"runtime.source_digest={doc.runtime.source_digest[:16]} does not match runtime {profile.name!r} "
            f"installed here ({profile.source_digest[:16]}); render the document with this rlaunch (fresh RL version)"
        )
    nodes = geo.physical_nodes(alloc.gpus_per_node)
    if alloc.num_nodes != nodes:
        problems.append(
            f"cluster.allocation.num_nodes={alloc.num_nodes} does not match the role plan's {nodes} physical node(s)"
        )
    if alloc.gpus_per_node != geo.policy_gpus_per_node:
        problems.append(
            f"cluster.allocation.gpus_per_node={alloc.gpus_per_node} does not match the policy placement ({geo.policy_gpus_per_node})"
        )
    if geo.planned_gpus != alloc.num_nodes * alloc.gpus_per_node:
        problems.append(
            f"the role plan uses {geo.planned_gpus} GPUs but the allocation has {alloc.num_nodes * alloc.gpus_per_node}"
        )
    if geo.strategy != profile.strategy:
        problems.append(
            f"runtime.profile={profile.name!r} runs {profile.strategy!r} but skyrl.trainer.strategy={geo.strategy!r}"
        )
    if doc.runtime.entrypoint not in profile.entrypoints:
        problems.append(
            f"runtime.entrypoint={doc.runtime.entrypoint!r} is not registered for {profile.name!r}; registered: {sorted(profile.entrypoints)}"
        )
    if doc.runtime.entrypoint == FULLY_ASYNC and geo.train_batch != geo.mini_batch:
        problems.append(
            f"fully_async requires trainer.train_batch_size == trainer.policy_mini_batch_size; got {geo.train_batch} and {geo.mini_batch}"
        )
    seed = get_path(skyrl, "trainer.seed")
    if seed != doc.run.seed:
        problems.append(f"run.seed={doc.run.seed} does not match skyrl.trainer.seed={seed}")
    for key, value, reason in unsupported_settings(profile, skyrl):
        problems.append(f"skyrl.{key}={value!r}: runtime {profile.name!r} cannot honour it ({reason})")
    heads = doc.inputs.model.num_attention_heads
    if heads and heads % geo.tp:
        problems.append(f"inference TP={geo.tp} does not divide the model's {heads} attention heads")
    context = doc.inputs.model.context_length
    budget = get_path(skyrl, "trainer.max_prompt_length") + get_path(
        skyrl, "generator.sampling_params.max_generate_length"
    )
    if context and budget > context:
        problems.append(f"token budget {budget} exceeds the model's context length {context}")
    if problems:
        raise DocumentError(problems, what="resolved launch document")
    return geo
