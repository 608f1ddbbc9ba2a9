"""Topology rules: positive, bounded sizes; policy footprint; engine geometry; the exact GPU budget."""

from __future__ import annotations

from rlaunch.launch_config.geometry import ROLE_PLAN_KEYS, Geometry
from rlaunch.rules.devices import variants
from rlaunch.rules.subject import MAX_SIZE, Subject, Violation, divisor_hint, divisors, violation

CODES = (
    "topology.non_positive",
    "topology.too_large",
    "role_plan.non_positive",
    "role_plan.too_large",
    "role_plan.policy_nodes_exceed_topology",
    "role_plan.policy_gpus_exceed_node",
    "role_plan.policy_width_mismatch",
    "engine.colocated_slice",
    "engine.colocated_gpu_mismatch",
    "engine.exceeds_node",
    "engine.rollout_packing",
    "engine.expert_parallel",
    "engine.expert_parallel_skyrl",
    "topology.gpu_budget",
    "topology.gpu_variant_ambiguous",
)


def structure(s: Subject) -> list[Violation]:
    """Every size positive and at most MAX_SIZE; the other rules assume it (and print only such sizes)."""
    sizes = [("topology", name, getattr(s, name)) for name in ("num_nodes", "gpus_per_node")]
    sizes += [("role_plan", name, s.plan[name]) for name in ROLE_PLAN_KEYS if name != "colocate_all"]
    sizes += [("role_plan", f"critic.{name}", value) for name, value in (s.plan.get("critic") or {}).items()]
    out = []
    for kind, name, value in sizes:
        if abs(value) > MAX_SIZE:
            out.append(
                violation(
                    f"{kind}.too_large",
                    [f"{kind}.{name}"],
                    f"{kind}.{name} is a {value.bit_length()}-bit number; sizes beyond 2**62 are typos, not plans",
                    f"set {kind}.{name} to the intended size",
                    bits=value.bit_length(),
                )
            )
        elif value <= 0:
            what = "topology" if kind == "topology" else "role plan"
            out.append(
                violation(
                    f"{kind}.non_positive",
                    [f"{kind}.{name}"],
                    f"SkyRL {what} {name}={value} must be positive",
                    f"set {kind}.{name} to a positive {'count' if kind == 'topology' else 'integer'}",
                    value=value,
                )
            )
    return out


def engine_tps(s: Subject, geo: Geometry) -> list[int]:
    """The engine tensor-parallel sizes this model and node hold, ascending: each divides the model's
    attention heads (when known: vLLM shards them evenly) and makes an engine that fills a node
    exactly (TP x PP x DP dividing its GPUs): never 3 or 7 on 8-GPU nodes. Every TP a fix offers is
    one of these."""
    heads = s.model.num_attention_heads if s.model is not None else None
    width = geo.pp * geo.dp
    g = s.gpus_per_node
    return [t for t in divisors(g) if width > 0 and g % (t * width) == 0 and (not heads or heads % t == 0)]


def wider_engines(s: Subject, geo: Geometry, at_least: int) -> tuple[int, int] | None:
    """The smallest engine TP of at least `at_least` among `engine_tps`, with the engine count that
    keeps the rollout GPUs; None when no such TP is held (a fix then names no TP)."""
    width = geo.pp * geo.dp
    for tp in engine_tps(s, geo):
        if tp >= at_least and geo.rollout_gpus % (tp * width) == 0:
            return tp, geo.rollout_gpus // (tp * width)
    return None


def gpu_variant(s: Subject) -> list[Violation]:
    """A device name that a family of several memory sizes shares (`A100`) is refused with the exact
    names: sizing the plan for one of them would judge it against a card it may not run on."""
    choices = variants(s.gpu_variant)
    if not choices:
        return []
    return [
        violation(
            "topology.gpu_variant_ambiguous",
            ["topology.gpu_variant"],
            f"gpu_variant={s.gpu_variant!r} names {len(choices)} devices of different memory: {', '.join(choices)}",
            f"set topology.gpu_variant to one of {', '.join(choices)}",
            gpu_variant=s.gpu_variant,
            choices=list(choices),
        )
    ]


def topology_rules(s: Subject, geo: Geometry) -> list[Violation]:
    n, g = s.num_nodes, s.gpus_per_node
    tp, pp, dp, ep = geo.tp, geo.pp, geo.dp, geo.ep
    allocated = n * g
    out = []
    if geo.policy_nodes > n:
        out.append(
            violation(
                "role_plan.policy_nodes_exceed_topology",
                ["role_plan.policy_num_nodes", "topology.num_nodes"],
                f"policy_num_nodes={geo.policy_nodes} exceeds the allocated topology of {n} node(s)",
                "lower policy_num_nodes or allocate more nodes",
                policy_num_nodes=geo.policy_nodes,
                num_nodes=n,
            )
        )
    if geo.policy_gpus_per_node > g:
        out.append(
            violation(
                "role_plan.policy_gpus_exceed_node",
                ["role_plan.policy_num_gpus_per_node", "topology.gpus_per_node"],
                f"policy_num_gpus_per_node={geo.policy_gpus_per_node} exceeds the {g} GPUs on one allocated node",
                "lower policy_num_gpus_per_node to the node width",
                policy_num_gpus_per_node=geo.policy_gpus_per_node,
                gpus_per_node=g,
            )
        )
    elif geo.policy_gpus_per_node != g:
        out.append(
            violation(
                "role_plan.policy_width_mismatch",
                ["role_plan.policy_num_gpus_per_node", "topology.gpus_per_node"],
                f"policy_num_gpus_per_node={geo.policy_gpus_per_node} must match the whole-node topology width gpus_per_node={g}",
                f"set policy_num_gpus_per_node={g} (policy nodes are whole nodes)",
                policy_num_gpus_per_node=geo.policy_gpus_per_node,
                gpus_per_node=g,
            )
        )
    slice_, ranks = geo.engine_slice, geo.engine_gpus
    engine_desc = f"{geo.engines} engines x TP{tp} x PP{pp} x DP{dp}"
    if geo.colocate_all:
        if g % slice_:
            slices = {t * pp for t in engine_tps(s, geo)}
            fix = (
                f"choose TP*PP among the divisors of {g}: {divisor_hint(g, keep=slices.__contains__)}"
                if slices
                else f"choose PP among the divisors of {g}: {divisor_hint(g)}"
            )
            out.append(
                violation(
                    "engine.colocated_slice",
                    [
                        "role_plan.inference_engine_tensor_parallel_size",
                        "role_plan.inference_engine_pipeline_parallel_size",
                    ],
                    f"each colocated inference engine TP*PP slice must divide gpus_per_node; got TP*PP={slice_} and gpus_per_node={g}",
                    fix,
                    slice=slice_,
                    gpus_per_node=g,
                )
            )
        if geo.rollout_gpus != geo.policy_world:
            out.append(
                violation(
                    "engine.colocated_gpu_mismatch",
                    ["role_plan.num_inference_engines", "role_plan.inference_engine_data_parallel_size"],
                    f"colocated roles must use the same GPUs: policy={geo.policy_world}, rollout={geo.rollout_gpus} ({engine_desc})",
                    f"make engines x TP x PP x DP equal {geo.policy_world}",
                    policy=geo.policy_world,
                    rollout=geo.rollout_gpus,
                )
            )
    elif ranks > g:
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
        free_nodes = n - geo.policy_nodes - (geo.critic_nodes if geo.dedicated_critic_gpus else 0)
        needed = geo.rollout_nodes(g)
        if needed is not None and needed > free_nodes and geo.planned_gpus == allocated:
            out.append(
                violation(
                    "engine.rollout_packing",
                    ["role_plan.num_inference_engines"],
                    f"{geo.engines} engines of {ranks} GPUs need {needed} whole node(s) (engines never straddle nodes) but {free_nodes} remain after the policy{' and the critic' if geo.dedicated_critic_gpus else ''}",
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
                f"choose EP among the divisors of {tp * dp}: {divisor_hint(tp * dp)}",
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
    if geo.planned_gpus != allocated:
        parts = f"policy {geo.policy_world}" + (
            "" if geo.colocate_all else f" + rollout {geo.rollout_gpus} = {engine_desc}"
        )
        parts += f" + critic {geo.dedicated_critic_gpus}" if geo.dedicated_critic_gpus else ""
        out.append(
            violation(
                "topology.gpu_budget",
                ["role_plan", "topology.num_nodes", "topology.gpus_per_node"],
                f"role plan describes {geo.planned_gpus} GPUs ({parts}) but the topology allocates {allocated} ({n} nodes x {g})",
                "make the role plan consume the allocation exactly: change engines/DP or the policy footprint, or the topology",
                planned=geo.planned_gpus,
                allocated=allocated,
            )
        )
    return out
