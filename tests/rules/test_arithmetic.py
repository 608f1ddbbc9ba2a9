"""The arithmetic rules as properties: for any sizes, a rule refuses exactly the plans its
condition names, with the numbers that decided it.

Each property draws the sizes a rule reads (small ones, so every edge is drawn: equal, one over,
one under, a multiple and not) and states the rule's condition independently of the code: an
off-by-one, a dropped factor or a swapped operand refuses a plan it should accept or accepts one
it should refuse. The rules are called on the one `Geometry`, as the preflight and the host call
them.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rlaunch.launch_config.composition import set_path
from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules import batches, recipe_rules, runtime_rules, topology
from rlaunch.rules.subject import Subject, divisor_hint, divisors
from rlaunch.skyrl import ModelFacts

from .helpers import FSDP, SEED, rendered

SEED_COMPOSED = FSDP.compose(rendered(SEED))[0]
small = st.integers(min_value=1, max_value=12)
EXAMPLES = settings(max_examples=300, deadline=None)


def geometry(**values: Any) -> Geometry:
    """The seed's geometry (policy 4 x 8, four DP8 engines, 256/64/2, n=8) with `values` changed."""
    fields: dict[str, Any] = dict(
        strategy="fsdp", colocate_all=False, policy_nodes=4, policy_gpus_per_node=8, ref_nodes=4,
        ref_gpus_per_node=8, engines=4, tp=1, pp=1, dp=8, ep=1, train_batch=256, mini_batch=64, micro_batch=2,
        n_samples=8, use_reference=True, policy_sp=1, ref_sp=1, megatron_policy=(1, 1, 1), megatron_ref=(1, 1, 1),
    )  # fmt: skip
    fields.update(values)
    return Geometry(**fields)


def by_code(found: list[Any]) -> dict[str, dict[str, Any]]:
    out = {v.code: dict(v.values) for v in found}
    assert len(out) == len(found), [v.code for v in found]  # each rule at most once here
    return out


# --- batches --------------------------------------------------------------------------------------

COMPOSED = {"trainer": {"micro_forward_batch_size_per_gpu": 1}}


@EXAMPLES
@given(
    train=st.integers(1, 80), mini=small, micro=small, n=small, policy_nodes=st.integers(1, 3),
    width=st.integers(1, 4), ref_nodes=st.integers(1, 3), use_reference=st.booleans(), trims_tail=st.booleans(),
)  # fmt: skip
def test_the_batch_rules_refuse_exactly_their_conditions(
    train: int, mini: int, micro: int, n: int, policy_nodes: int, width: int, ref_nodes: int, use_reference: bool,
    trims_tail: bool,
) -> None:  # fmt: skip
    """The tail stride binds only a trainer that trims its batches (not fully async)."""
    geo = geometry(
        train_batch=train, mini_batch=mini, micro_batch=micro, n_samples=n, policy_nodes=policy_nodes,
        policy_gpus_per_node=width, ref_nodes=ref_nodes, ref_gpus_per_node=width, use_reference=use_reference,
        trims_tail=trims_tail,
    )  # fmt: skip
    found = by_code(batches.batch_rules(geo, COMPOSED))
    dp, ref_dp = policy_nodes * width, ref_nodes * width
    expected: dict[str, dict[str, Any]] = {}
    if train % mini:
        expected["batch.train_mini"] = {"train": train, "mini": mini}
    mini_per_gpu, train_per_gpu = mini * n // dp, train * n // dp
    if mini_per_gpu == 0:
        expected["batch.per_gpu_mini_zero"] = {"mini": mini, "n": n, "dp": dp}
    else:
        if mini_per_gpu % micro:
            expected["batch.per_gpu_mini_micro"] = {"per_gpu_mini": mini_per_gpu, "micro": micro}
        if train_per_gpu % mini_per_gpu:
            expected["batch.per_gpu_train_mini"] = {"per_gpu_train": train_per_gpu, "per_gpu_mini": mini_per_gpu}
    lcm = math.lcm(dp, ref_dp) if use_reference else dp
    if use_reference and train * n < lcm:
        expected["batch.reference_lcm"] = {"train_times_n": train * n, "lcm": lcm}
    stride = lcm // math.gcd(lcm, n)
    if trims_tail and train % stride:
        expected["batch.tail_stride"] = {"train": train, "stride": stride}
    assert found == expected


PER_GPU_CODES = {"batch.train_mini", "batch.per_gpu_mini_zero", "batch.per_gpu_mini_micro", "batch.per_gpu_train_mini"}


@EXAMPLES
@given(train=st.integers(1, 80), mini=small, micro=small, n=small, dp=st.integers(1, 12))
def test_every_mini_batch_a_train_mini_fix_offers_keeps_the_per_gpu_rules(
    train: int, mini: int, micro: int, n: int, dp: int
) -> None:
    """The issue's mini batches among a train batch's divisors that then break the per-GPU rules: each
    one offered passes them all; none offered only when no divisor would, and then the stated remedy works."""
    shape = {
        "micro_batch": micro,
        "n_samples": n,
        "policy_nodes": 1,
        "policy_gpus_per_node": dp,
        "use_reference": False,
    }
    (found,) = [v for v in batches.batch_rules(geometry(train_batch=train, mini_batch=mini, **shape), COMPOSED)
                if v.code == "batch.train_mini"] or [None]  # fmt: skip
    if found is None:
        return
    offered = [int(m) for m in found.fix.split("[", 1)[1].rstrip("]").split(", ")] if "[" in found.fix else []

    def keeps(m: int, t: int = train) -> bool:
        codes = {v.code for v in batches.batch_rules(geometry(train_batch=t, mini_batch=m, **shape), COMPOSED)}
        return not codes & PER_GPU_CODES

    assert offered == [m for m in divisors(train) if keeps(m)]
    if not offered:
        assert f"a multiple of {dp}*{micro} (then train_batch_size itself" in found.fix
        multiple = train * dp * micro  # train*n then a multiple of dp*micro for any n
        assert keeps(multiple, multiple)


@EXAMPLES
@given(
    micro_forward=st.integers(-3, 3),
    policy_sp=st.integers(-1, 9),
    ref_sp=st.integers(-1, 9),
    ref_nodes=st.integers(1, 5),
    use_reference=st.booleans(),
)
def test_sequence_parallel_sizes_divide_their_role_and_micro_forward_batches_are_positive(
    micro_forward: int, policy_sp: int, ref_sp: int, ref_nodes: int, use_reference: bool
) -> None:
    """The reference's Ulysses size is checked only when a KL term builds the reference."""
    geo = geometry(
        policy_sp=policy_sp, ref_sp=ref_sp, ref_nodes=ref_nodes, ref_gpus_per_node=2, use_reference=use_reference
    )
    composed = {"trainer": {"micro_forward_batch_size_per_gpu": micro_forward}}
    found = [
        v
        for v in batches.batch_rules(geo, composed)
        if not v.code.startswith("batch.") or v.code == "batch.micro_forward"
    ]
    expected = []
    if micro_forward <= 0:
        expected.append(("batch.micro_forward", {"value": micro_forward}))
    roles = (("policy", policy_sp, 32), ("ref", ref_sp, ref_nodes * 2))
    for role, sp, world in roles if use_reference else roles[:1]:
        if sp <= 0 or world % sp:
            expected.append(("strategy.sequence_parallel", {"sp": sp, "world": world}))
            assert any(v.fields == (f"config_yaml.trainer.{role}.sequence_parallel_size",) for v in found)
    assert [(v.code, dict(v.values)) for v in found] == expected


MEGATRON_KEYS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size")


megatron_shape = st.tuples(st.integers(1, 8), st.integers(1, 4), st.integers(1, 3))


@EXAMPLES
@given(
    policy=megatron_shape, ref=megatron_shape, ep=st.integers(1, 8), etp=st.none() | st.integers(1, 4),
    policy_sp=st.integers(0, 2), ref_sp=st.integers(0, 2), padding=st.booleans(), use_reference=st.booleans(),
)  # fmt: skip
def test_the_megatron_rules_refuse_exactly_their_conditions(
    policy: tuple[int, int, int], ref: tuple[int, int, int], ep: int, etp: int | None, policy_sp: int, ref_sp: int,
    padding: bool, use_reference: bool,
) -> None:  # fmt: skip
    """Each built role's world (32) against its TP*PP*CP and PP*EP*ETP (the reference only when a KL
    term builds it); Ulysses and context parallelism for both roles, built or not."""
    experts = {"policy": (ep, etp), "ref": (1, None)}
    composed: dict[str, Any] = {"micro_forward_batch_size_per_gpu": 1, "remove_microbatch_padding": padding}
    for role, shape in (("policy", policy), ("ref", ref)):
        config = dict(zip(MEGATRON_KEYS, shape, strict=True))
        config.update(expert_model_parallel_size=experts[role][0], expert_tensor_parallel_size=experts[role][1])
        composed[role] = {"megatron_config": config}
    geo = geometry(
        strategy="megatron", megatron_policy=policy, megatron_ref=ref, policy_sp=policy_sp, ref_sp=ref_sp,
        use_reference=use_reference,
    )  # fmt: skip
    found = [
        (v.code, v.fields, dict(v.values))
        for v in batches.batch_rules(geo, {"trainer": composed})
        if v.code.startswith("strategy.")
    ]
    expected: list[tuple[str, tuple[str, ...], dict[str, Any]]] = []
    shapes = {"policy": policy, "ref": ref}
    for role in ("policy", "ref") if use_reference else ("policy",):
        (tp, pp, cp), (role_ep, role_etp) = shapes[role], experts[role]
        config = f"config_yaml.trainer.{role}.megatron_config"
        if 32 % (tp * pp * cp):
            expected.append(("strategy.megatron_world", (config,), {"world": 32, "model_parallel": tp * pp * cp}))
        if 32 % (pp * role_ep * (role_etp or tp)):
            expert = pp * role_ep * (role_etp or tp)
            fields = (f"{config}.expert_model_parallel_size",)
            expected.append(("strategy.megatron_expert", fields, {"world": 32, "expert_parallel": expert}))
    for role, sp in (("policy", policy_sp), ("ref", ref_sp)):
        if sp != 1:
            fields = (f"config_yaml.trainer.{role}.sequence_parallel_size",)
            expected.append(("strategy.megatron_sequence_parallel", fields, {"value": sp}))
    context = {role: shape[2] for role, shape in shapes.items() if shape[2] > 1}
    if context and not padding:
        fields = ("config_yaml.trainer.remove_microbatch_padding",) + tuple(
            f"config_yaml.trainer.{role}.megatron_config.context_parallel_size" for role in context
        )
        expected.append(("strategy.megatron_context_parallel", fields, {f"{r}_cp": cp for r, cp in context.items()}))
    assert found == expected


# --- topology -------------------------------------------------------------------------------------


@EXAMPLES
@given(
    nodes=st.integers(1, 6), width=st.integers(1, 8), policy_nodes=st.integers(1, 6), policy_width=st.integers(1, 9),
    engines=st.integers(1, 10), tp=st.integers(1, 4), pp=st.integers(1, 2), dp=st.integers(1, 4),
    ep=st.integers(1, 8), colocate=st.booleans(),
)  # fmt: skip
def test_the_topology_rules_refuse_exactly_their_conditions(
    nodes: int, width: int, policy_nodes: int, policy_width: int, engines: int, tp: int, pp: int, dp: int, ep: int,
    colocate: bool,
) -> None:  # fmt: skip
    geo = geometry(
        colocate_all=colocate, policy_nodes=policy_nodes, policy_gpus_per_node=policy_width, engines=engines,
        tp=tp, pp=pp, dp=dp, ep=ep,
    )  # fmt: skip
    s = Subject(nodes, width, "H100", {}, {}, FSDP, "standard")
    found = by_code(topology.topology_rules(s, geo))
    policy, engine, allocated = policy_nodes * policy_width, tp * pp * dp, nodes * width
    planned = policy if colocate else policy + engines * engine
    expected: dict[str, dict[str, Any]] = {}
    if policy_nodes > nodes:
        expected["role_plan.policy_nodes_exceed_topology"] = {"policy_num_nodes": policy_nodes, "num_nodes": nodes}
    if policy_width > width:
        expected["role_plan.policy_gpus_exceed_node"] = {
            "policy_num_gpus_per_node": policy_width,
            "gpus_per_node": width,
        }
    if policy_width < width:
        expected["role_plan.policy_width_mismatch"] = {"policy_num_gpus_per_node": policy_width, "gpus_per_node": width}
    if colocate and width % (tp * pp):
        expected["engine.colocated_slice"] = {"slice": tp * pp, "gpus_per_node": width}
    if colocate and engines * engine != policy:
        expected["engine.colocated_gpu_mismatch"] = {"policy": policy, "rollout": engines * engine}
    if not colocate and engine > width:
        expected["engine.exceeds_node"] = {"engine_gpus": engine, "gpus_per_node": width}
    if not colocate and engine <= width and planned == allocated:
        needed = -(-engines // (width // engine))  # whole engines per node, engines never straddle one
        if needed > nodes - policy_nodes:
            expected["engine.rollout_packing"] = {"needed_nodes": needed, "free_nodes": nodes - policy_nodes}
    if (tp * dp) % ep:
        expected["engine.expert_parallel"] = {"tp_times_dp": tp * dp, "ep": ep}
    elif 1 < ep != tp * dp:
        expected["engine.expert_parallel_skyrl"] = {"tp_times_dp": tp * dp, "ep": ep}
    if planned != allocated:
        expected["topology.gpu_budget"] = {"planned": planned, "allocated": allocated}
    assert found == expected


def test_the_divisors_of_one_and_of_nothing() -> None:
    assert divisors(1) == [1] and divisor_hint(1) == "[1]"
    assert divisors(0) == divisors(-6) == [] and divisor_hint(0) == "[]"
    assert divisors(4) == [1, 2, 4]  # a square root is listed once


# --- fully-async and recipe bounds ----------------------------------------------------------------


@EXAMPLES
@given(train=small, mini=small, workers=st.integers(0, 80), staleness=st.integers(0, 6))
def test_fully_async_workers_lie_between_one_and_staleness_plus_one_mini_batches(
    train: int, mini: int, workers: int, staleness: int
) -> None:
    composed = {
        "trainer": {
            "fully_async": {"num_parallel_generation_workers": workers, "max_staleness_steps": staleness},
            "algorithm": {"policy_loss_type": "cispo"},
        },
        "generator": {"batched": False},
    }
    s = Subject(8, 8, "H100", {}, {"trainer": {"fully_async": {"enabled": True}}}, FSDP, "fully_async")
    found = by_code(runtime_rules.entrypoint_rules(s, geometry(train_batch=train, mini_batch=mini), composed))
    expected: dict[str, dict[str, Any]] = {}
    if train != mini:
        expected["entrypoint.fully_async_batch"] = {"train": train, "mini": mini}
    most = mini * (staleness + 1)
    if not mini <= workers <= most:
        expected["entrypoint.fully_async_workers"] = {"workers": workers, "least": mini, "most": most}
    assert found == expected


@EXAMPLES
@given(
    prompt=st.integers(1, 9), turns=st.integers(1, 3), max_input=st.none() | st.integers(0, 12),
    engines=st.integers(1, 5), prefill=st.integers(-1, 6), pd=st.booleans(),
)  # fmt: skip
def test_input_length_and_prefill_engines_stay_in_their_bounds(
    prompt: int, turns: int, max_input: int | None, engines: int, prefill: int, pd: bool
) -> None:
    composed = copy.deepcopy(SEED_COMPOSED)
    for key, value in {
        "trainer.max_prompt_length": prompt,
        "generator.max_turns": turns,
        "generator.max_input_length": max_input,
        "generator.inference_engine.num_engines": engines,
        "generator.inference_engine.enable_pd": pd,
        "generator.inference_engine.num_prefill": prefill,
    }.items():
        set_path(composed, key, value)
    found = by_code(recipe_rules.recipe_rules(composed))
    expected: dict[str, dict[str, Any]] = {}
    if max_input is not None and (max_input != prompt if turns == 1 else max_input < prompt):
        expected["recipe.input_length"] = {"value": max_input}
    if pd and not (engines >= 2 and 1 <= prefill <= engines - 1):
        expected["recipe.prefill_decode"] = {"num_prefill": prefill, "num_engines": engines}
    assert found == expected


@EXAMPLES
@given(heads=st.none() | st.integers(1, 40), tp=st.integers(1, 8), context=st.none() | st.integers(1, 40))
def test_the_model_facts_bound_tensor_parallelism_and_the_token_budget(
    heads: int | None, tp: int, context: int | None
) -> None:
    s = Subject(
        8, 8, "H100", {"inference_engine_tensor_parallel_size": tp}, {}, FSDP, "standard",
        model=ModelFacts(num_attention_heads=heads, context_length=context),
    )  # fmt: skip
    composed = {"trainer": {"max_prompt_length": 7}, "generator": {"sampling_params": {"max_generate_length": 13}}}
    expected: dict[str, dict[str, Any]] = {}
    if heads and heads % tp:
        expected["model.tp_heads"] = {"heads": heads, "tp": tp}
    if context and 20 > context:
        expected["model.context_budget"] = {"budget": 20, "context_length": context}
    found = recipe_rules.model_rules(s, composed, Geometry.from_recipe(SEED_COMPOSED))
    assert by_code(found) == expected
    for v in found:  # the TPs offered divide the heads and fill the seed's DP8 engines' node: TP 1
        assert v.code != "model.tp_heads" or v.fix.endswith(" whose engines fill a 8-GPU node: [1]")
