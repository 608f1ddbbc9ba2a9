"""Topology rules: positive dimensions, policy footprint, engine geometry and the exact GPU budget."""

from __future__ import annotations

import math

from rlaunch.skyrl.errors import PreflightError
from rlaunch.skyrl.preflight.common import divisors, violation
from rlaunch.skyrl.role_plan import SkyRLRolePlan, SkyRLTopology


def structure(topology: SkyRLTopology) -> list[PreflightError]:
    out = []
    for name in ("num_nodes", "gpus_per_node"):
        value = getattr(topology, name)
        if value <= 0:
            out.append(
                violation(
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
                violation(
                    "role_plan.non_positive",
                    [f"role_plan.{name}"],
                    f"SkyRL role plan {name}={value} must be positive",
                    f"set role_plan.{name} to a positive integer",
                    value=value,
                )
            )
    return out


def topology_rules(t: SkyRLTopology) -> list[PreflightError]:
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
            violation(
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
            violation(
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
            violation(
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
                violation(
                    "engine.colocated_slice",
                    [
                        "role_plan.inference_engine_tensor_parallel_size",
                        "role_plan.inference_engine_pipeline_parallel_size",
                    ],
                    f"each colocated inference engine TP*PP slice must divide gpus_per_node; got TP*PP={slice_} and gpus_per_node={g}",
                    f"choose TP*PP among the divisors of {g}: {divisors(g)}",
                    slice=slice_,
                    gpus_per_node=g,
                )
            )
        if p.rollout_gpus != p.policy_gpus:
            out.append(
                violation(
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
                violation(
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
                    violation(
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
            violation(
                "engine.expert_parallel",
                ["role_plan.inference_engine_expert_parallel_size"],
                f"inference engine TP*DP={tp * dp} must be divisible by expert parallel size EP={ep}",
                f"choose EP among the divisors of {tp * dp}: {divisors(tp * dp)}",
                tp_times_dp=tp * dp,
                ep=ep,
            )
        )
    elif ep > 1 and ep != tp * dp:
        out.append(
            violation(
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
            violation(
                "topology.gpu_budget",
                ["role_plan", "topology.num_nodes", "topology.gpus_per_node"],
                f"role plan describes {p.planned_gpus} GPUs ({parts}) but the topology allocates {t.allocated_gpus} ({n} nodes x {g})",
                "make the role plan consume the allocation exactly: change engines/DP or the policy footprint, or the topology",
                planned=p.planned_gpus,
                allocated=t.allocated_gpus,
            )
        )
    return out
