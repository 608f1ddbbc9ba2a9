"""Every arithmetic rule at its edge: the largest accepted input passes the whole preflight, and the
smallest refused one gets the rule's code with the numbers that decided it.

The rules are the ones the launch host applies too (`rlaunch.rules`), so an off-by-one or a
dropped factor in either place fails here. Each case changes one number of a plan the preflight
accepts: the seed's 64-GPU plan (policy 4 x 8, four DP8 engines, data-parallel size 32), a
colocated 1 x 8 plan, or the one-slot CPU plan.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from rlaunch.rules import MAX_SIZE
from rlaunch.skyrl import ModelFacts, SkyRLTopology
from tests.support.specs import (
    codes,
    cpu_plan,
    cpu_topology,
    plan,
    recipe,
    seed_plan,
    seed_topology,
    topology,
    violations,
)


def fully_async(workers: int | None = None) -> dict[str, Any]:
    """A fully-async recipe SkyRL accepts (rollout-anchored loss, staleness 4: workers in [mini, 5 mini])."""
    settings: dict[str, Any] = {"max_staleness_steps": 4}
    if workers is not None:
        settings["num_parallel_generation_workers"] = workers
    return recipe(
        entrypoint="fully_async", trainer={"algorithm": {"policy_loss_type": "rollout_is"}, "fully_async": settings}
    )


FULLY_ASYNC = fully_async(320)
MEGATRON = "megatron"


@dataclass(frozen=True)
class Edge:
    """`accepted` passes the whole preflight; `refused` gets `code` with `values` (a subset)."""

    code: str
    accepted: dict[str, Any]
    refused: dict[str, Any]
    values: dict[str, Any]
    message: str = ""  # a fragment the refusal's message must contain


def seed(**plan_values: Any) -> dict[str, Any]:
    return {"topo": seed_topology(**plan_values)}


def seed_recipe(tree: dict[str, Any], profile: str = "fsdp", **plan_values: Any) -> dict[str, Any]:
    return {"topo": seed_topology(**plan_values), "tree": tree, "profile": profile}


# Context parallelism with microbatch padding kept: refused under either accepted neighbour below.
MEGATRON_CP2_PADDED = seed_recipe(
    recipe(trainer={"remove_microbatch_padding": False, "policy": {"megatron_config": {"context_parallel_size": 2}}}),
    MEGATRON,
)


def colocated(**plan_values: Any) -> dict[str, Any]:
    return {"topo": topology(plan(**plan_values))}


def nodes(num_nodes: int, gpus_per_node: int = 8, **plan_values: Any) -> dict[str, Any]:
    return {"topo": SkyRLTopology(num_nodes, gpus_per_node, "H100", seed_plan(**plan_values))}


def cpu(num_nodes: int = 1, **plan_values: Any) -> dict[str, Any]:
    return {"topo": cpu_topology(cpu_plan(**plan_values), num_nodes=num_nodes), "profile": "trl-cpu"}


def model(heads: int | None = None, context: int | None = None, **plan_values: Any) -> dict[str, Any]:
    return {"topo": seed_topology(**plan_values), "model": ModelFacts(heads, context)}


def megatron(**config: Any) -> dict[str, Any]:
    return seed_recipe(recipe(trainer={"policy": {"megatron_config": config}}), MEGATRON)


def wide(engine_gpus: int) -> dict[str, Any]:
    """Nodes of 6 GPUs, policy 4 x 6 (data-parallel size 24), the other 24 GPUs as engines of
    `engine_gpus` (DP): 3-GPU engines pack two to a node, 4-GPU engines one."""
    return nodes(
        8, 6, policy_num_gpus_per_node=6, num_inference_engines=24 // engine_gpus,
        inference_engine_data_parallel_size=engine_gpus, train_batch_size=48, policy_mini_batch_size=24,
    )  # fmt: skip


PREFILL_ONE = recipe(generator={"inference_engine": {"enable_pd": True, "num_prefill": 1}})


def ten(engine_gpus: int, engines: int) -> dict[str, Any]:
    """Nodes of 10 GPUs, policy 1 x 10, two nodes of engines: 5-GPU engines fill them, 4-GPU ones
    pack two to a node and the fifth needs a partly filled third node."""
    role = seed_plan(
        policy_num_nodes=1, policy_num_gpus_per_node=10, num_inference_engines=engines,
        inference_engine_data_parallel_size=engine_gpus, train_batch_size=20, policy_mini_batch_size=10,
    )  # fmt: skip
    return {"topo": SkyRLTopology(3, 10, "H100", role)}


def crossing(
    code: str,
    case: Callable[..., dict[str, Any]],
    name: str,
    accepted: Any,
    refused: Any,
    values: dict[str, Any],
    message: str = "",
    **fixed: Any,
) -> Edge:
    """The edge of one number: `case(name=accepted, **fixed)` passes, `case(name=refused, **fixed)` is refused."""
    return Edge(code, case(**fixed, **{name: accepted}), case(**fixed, **{name: refused}), values, message)


def trainer(**keys: Any) -> dict[str, Any]:
    return seed_recipe(recipe(trainer=keys))


def prefill(num_prefill: int) -> dict[str, Any]:
    return seed_recipe(recipe(generator={"inference_engine": {"enable_pd": True, "num_prefill": num_prefill}}))


def multi_turn(max_turns: int, max_input_length: int) -> dict[str, Any]:
    return seed_recipe(recipe(generator={"max_turns": max_turns, "max_input_length": max_input_length}))


def fully_async_seed(workers: int = 320, **plan_values: Any) -> dict[str, Any]:
    return seed_recipe(fully_async(workers), **plan_values)


# A table, one edge a line where it fits.
# fmt: off
EDGES = [
    crossing("role_plan.non_positive", colocated, "n_samples_per_prompt", 1, 0, {"value": 0}),
    crossing("role_plan.too_large", seed, "train_batch_size", MAX_SIZE, MAX_SIZE + 1, {"bits": 63}),
    Edge("topology.non_positive", colocated(), {"topo": topology(num_nodes=0)}, {"value": 0}),
    Edge(
        "role_plan.policy_nodes_exceed_topology",
        {"topo": topology(plan(policy_num_nodes=2, num_inference_engines=16), num_nodes=2)},
        {"topo": topology(plan(policy_num_nodes=3, num_inference_engines=24), num_nodes=2)},
        {"policy_num_nodes": 3, "num_nodes": 2},
    ),
    crossing(
        "role_plan.policy_gpus_exceed_node", seed, "policy_num_gpus_per_node", 8, 9,
        {"policy_num_gpus_per_node": 9, "gpus_per_node": 8},
    ),
    crossing(
        "role_plan.policy_width_mismatch", seed, "policy_num_gpus_per_node", 8, 7,
        {"policy_num_gpus_per_node": 7, "gpus_per_node": 8},
    ),
    Edge(
        "engine.colocated_slice",
        colocated(num_inference_engines=2, inference_engine_tensor_parallel_size=4),
        colocated(
            num_inference_engines=1, inference_engine_tensor_parallel_size=3, inference_engine_data_parallel_size=3
        ),
        {"slice": 3, "gpus_per_node": 8},
    ),
    crossing("engine.colocated_gpu_mismatch", colocated, "num_inference_engines", 8, 7, {"policy": 8, "rollout": 7}),
    Edge(
        "engine.exceeds_node",
        seed(num_inference_engines=4, inference_engine_data_parallel_size=8),
        nodes(8, num_inference_engines=2, inference_engine_data_parallel_size=9),
        {"engine_gpus": 9, "gpus_per_node": 8},
    ),
    Edge("engine.rollout_packing", wide(3), wide(4), {"needed_nodes": 6, "free_nodes": 4}),
    Edge("engine.rollout_packing", ten(5, 4), ten(4, 5), {"needed_nodes": 3, "free_nodes": 2}),
    crossing("engine.expert_parallel", seed, "inference_engine_expert_parallel_size", 8, 7, {"tp_times_dp": 8, "ep": 7}),
    crossing(
        "engine.expert_parallel_skyrl", seed, "inference_engine_expert_parallel_size", 1, 4, {"tp_times_dp": 8, "ep": 4}
    ),
    crossing("topology.gpu_budget", seed, "num_inference_engines", 4, 3, {"planned": 56, "allocated": 64}),
    crossing("batch.train_mini", seed, "train_batch_size", 320, 324, {"train": 324, "mini": 64}),
    crossing("batch.micro_forward", trainer, "micro_forward_batch_size_per_gpu", 1, 0, {"value": 0}),
    crossing(
        "batch.per_gpu_mini_zero", seed, "n_samples_per_prompt", 8, 7, {"mini": 4, "n": 7, "dp": 32},
        policy_mini_batch_size=4, micro_train_batch_size_per_gpu=1,
    ),
    crossing(
        "batch.per_gpu_mini_micro", seed, "micro_train_batch_size_per_gpu", 16, 32, {"per_gpu_mini": 16, "micro": 32}
    ),
    crossing("batch.per_gpu_train_mini", seed, "train_batch_size", 128, 96, {"per_gpu_train": 24, "per_gpu_mini": 16}),
    crossing(
        "batch.reference_lcm", seed, "n_samples_per_prompt", 8, 7, {"train_times_n": 28, "lcm": 32},
        train_batch_size=4, policy_mini_batch_size=4, micro_train_batch_size_per_gpu=1,
    ),
    Edge(
        "batch.tail_stride",
        seed(train_batch_size=260, policy_mini_batch_size=4, micro_train_batch_size_per_gpu=1),
        seed(train_batch_size=258, policy_mini_batch_size=2, micro_train_batch_size_per_gpu=1),
        {"train": 258, "stride": 4},
    ),
    Edge(
        "strategy.sequence_parallel",
        seed_recipe(
            recipe(trainer={"policy": {"sequence_parallel_size": 32}, "ref": {"sequence_parallel_size": 32}}),
            policy_mini_batch_size=64,
            micro_train_batch_size_per_gpu=1,
            train_batch_size=256,
        ),
        seed_recipe(recipe(trainer={"policy": {"sequence_parallel_size": 33}})),
        {"sp": 33, "world": 32},
    ),
    crossing("strategy.megatron_non_positive", megatron, "pipeline_model_parallel_size", 1, 0, {"value": 0}),
    Edge(
        "strategy.megatron_world",
        megatron(tensor_model_parallel_size=4, pipeline_model_parallel_size=2),
        megatron(tensor_model_parallel_size=3),
        {"world": 32, "model_parallel": 3},
    ),
    crossing(
        "strategy.megatron_expert", megatron, "expert_model_parallel_size", 32, 3, {"world": 32, "expert_parallel": 3}
    ),
    crossing(  # PP counts: EP 32 alone would divide the world
        "strategy.megatron_expert", megatron, "expert_model_parallel_size", 16, 32, {"world": 32, "expert_parallel": 64},
        pipeline_model_parallel_size=2,
    ),
    Edge(
        "strategy.megatron_context_parallel",
        seed_recipe(recipe(trainer={"policy": {"megatron_config": {"context_parallel_size": 2}}}), MEGATRON),
        MEGATRON_CP2_PADDED,
        {"policy_cp": 2},
    ),
    crossing("entrypoint.fully_async_batch", fully_async_seed, "train_batch_size", 64, 128, {"train": 128, "mini": 64}),
    crossing(
        "entrypoint.fully_async_workers", fully_async_seed, "workers", 320, 321,
        {"workers": 321, "least": 64, "most": 320}, train_batch_size=64,
    ),
    crossing(
        "entrypoint.fully_async_workers", fully_async_seed, "workers", 64, 63,
        {"workers": 63, "least": 64, "most": 320}, train_batch_size=64,
    ),
    Edge("runtime.capability", cpu(num_nodes=1), cpu(num_nodes=2), {"value": 2}),
    Edge(
        "model.tp_heads",
        model(heads=32),
        model(heads=12, inference_engine_tensor_parallel_size=8, inference_engine_data_parallel_size=1),
        {"heads": 12, "tp": 8},
    ),
    Edge("model.context_budget", model(context=4096), model(context=4095), {"budget": 4096, "context_length": 4095}),
    crossing("recipe.max_training_steps", trainer, "max_training_steps", 1, 0, {"value": 0}),
    crossing("recipe.prefill_decode", prefill, "num_prefill", 3, 4, {"num_prefill": 4, "num_engines": 4}),
    crossing("recipe.prefill_decode", prefill, "num_prefill", 1, 0, {"num_prefill": 0, "num_engines": 4}),
    Edge(
        "recipe.prefill_decode",
        {"topo": nodes(6, num_inference_engines=2)["topo"], "tree": PREFILL_ONE},
        {"topo": nodes(5, num_inference_engines=1)["topo"], "tree": PREFILL_ONE},
        {"num_prefill": 1, "num_engines": 1},
    ),
    crossing(
        "recipe.input_length", multi_turn, "max_input_length", 1024, 1023, {"value": 1023},
        "must be at least trainer.max_prompt_length=1024", max_turns=2,
    ),
    crossing(
        "recipe.input_length", multi_turn, "max_input_length", 1024, 1025, {"value": 1025},
        "must equal trainer.max_prompt_length=1024", max_turns=1,
    ),
    Edge(
        "strategy.megatron_context_parallel",
        seed_recipe(recipe(trainer={"remove_microbatch_padding": False}), MEGATRON),
        MEGATRON_CP2_PADDED,
        {"policy_cp": 2},
    ),
]
# fmt: on


def verdict(case: dict[str, Any]) -> list[Any]:
    return violations(case["topo"], case.get("tree"), case.get("profile", "fsdp"), seed=17, model=case.get("model"))


@pytest.mark.parametrize("edge", EDGES, ids=[f"{e.code}-{i}" for i, e in enumerate(EDGES)])
def test_the_edge_of_each_rule(edge: Edge) -> None:
    assert verdict(edge.accepted) == [], [v.line() for v in verdict(edge.accepted)]
    hits = [v for v in verdict(edge.refused) if v.code == edge.code]
    assert hits, f"{edge.code} not in {codes(verdict(edge.refused))}"
    assert any(edge.values.items() <= v.values.items() for v in hits), [v.values for v in hits]
    assert any(edge.message in v.message for v in hits), [v.message for v in hits]
