"""A bounded preflight: any role plan, batch size or parallel size ends in a verdict.

`check_plan` over open-ended numbers (0, negative, 2**40, 5*10**7, huge primes, 2**80) returns
violations with registered codes or nothing, never another exception, and the divisors a fix lists
are searched in bounded work and capped. An accepted plan really is consistent: the properties
below re-derive what acceptance promises from the one geometry.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlaunch import rules
from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules.subject import DIVISOR_SEARCH, MAX_SIZE, divisor_hint, divisors
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl import ModelFacts, PreflightError, SkyRLCriticPlan, SkyRLRolePlan, SkyRLTopology, check_plan
from rlaunch.skyrl.values.config_yaml import render_recipe
from tests.support.specs import codes, only, plan, recipe, seed_topology, topology, violations

HUGE_PRIME = 2**89 - 1  # a Mersenne prime
NO_KL = recipe(trainer={"algorithm": {"use_kl_loss": False}})
KNOWN = set(rules.CODES)

sizes = st.one_of(
    st.integers(min_value=-3, max_value=70),
    st.sampled_from([0, -1, 2**40, 5 * 10**7, 10**9 + 7, HUGE_PRIME, MAX_SIZE, MAX_SIZE + 1, -(2**70), 2**80]),
    st.integers(min_value=1, max_value=7).map(lambda k: 2**k),
    st.integers(min_value=-(2**100), max_value=2**100),
)
PLAN_FIELDS = [name for name in SkyRLRolePlan.__dataclass_fields__ if name not in ("colocate_all", "critic")]


@st.composite
def plans(draw: st.DrawFn) -> SkyRLTopology:
    values: dict[str, Any] = {"colocate_all": draw(st.booleans())}
    for name in PLAN_FIELDS:
        values[name] = draw(sizes)
    values["critic"] = draw(st.none() | st.builds(SkyRLCriticPlan, sizes, sizes, sizes))
    return SkyRLTopology(
        num_nodes=draw(sizes),
        gpus_per_node=draw(sizes),
        gpu_variant=draw(st.sampled_from(["H100", "cpu"])),
        role_plan=SkyRLRolePlan(**values),
    )


@st.composite
def recipes(draw: st.DrawFn) -> dict[str, Any]:
    small = st.integers(min_value=-2, max_value=9) | st.sampled_from([2**40, 2**64])
    trainer: dict[str, Any] = {
        "policy": {"sequence_parallel_size": draw(small)},
        "ref": {"sequence_parallel_size": draw(small)},
        "micro_forward_batch_size_per_gpu": draw(small),
    }
    if draw(st.booleans()):
        trainer["policy"]["megatron_config"] = {
            "tensor_model_parallel_size": draw(small),
            "pipeline_model_parallel_size": draw(small),
            "context_parallel_size": draw(small),
            "expert_model_parallel_size": draw(small),
            "expert_tensor_parallel_size": draw(st.none() | small),
        }
    if draw(st.booleans()):
        trainer["fully_async"] = {"num_parallel_generation_workers": draw(small), "max_staleness_steps": draw(small)}
    generator = {"max_input_length": draw(st.none() | small | st.just("long"))}
    extra = {"entrypoint": draw(st.sampled_from(["standard", "fully_async"]))}
    return recipe(trainer=trainer, generator=generator, **extra)


def judged(found: list[PreflightError]) -> None:
    assert all(isinstance(v, PreflightError) for v in found)
    assert set(codes(found)) <= KNOWN, set(codes(found)) - KNOWN
    for v in found:
        assert v.fix and v.message and v.fields
        v.to_json()  # every value is printable and serialisable


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    topo=plans(),
    tree=recipes(),
    profile=st.sampled_from(["fsdp", "megatron", "trl-cpu"]),
    heads=st.none() | sizes,
    context=st.none() | sizes,
)
def test_any_plan_ends_in_acceptance_or_violations(
    topo: SkyRLTopology, tree: dict[str, Any], profile: str, heads: int | None, context: int | None
) -> None:
    judged(check_plan(topo, tree, profile, seed=3, model=ModelFacts(heads, context)))


@settings(max_examples=300, deadline=None)
@given(
    nodes=st.integers(1, 8),
    width=st.sampled_from([1, 2, 4, 6, 8]),
    colocate=st.booleans(),
    engines=st.integers(1, 16),
    tp=st.sampled_from([1, 2, 4]),
    dp=st.sampled_from([1, 2, 4, 8]),
    policy_nodes=st.integers(1, 8),
    train=st.sampled_from([8, 16, 32, 48, 64, 256]),
    mini=st.sampled_from([4, 8, 16, 32, 64]),
    micro=st.sampled_from([1, 2, 4]),
    n=st.sampled_from([1, 2, 4, 8]),
)
def test_an_accepted_plan_is_consistent(**v: Any) -> None:
    """Acceptance means: the allocation is consumed exactly, engines pack into whole nodes, and
    every batch splits evenly over the policy's data-parallel ranks."""
    role = plan(
        colocate_all=v["colocate"], policy_num_nodes=v["policy_nodes"], policy_num_gpus_per_node=v["width"],
        num_inference_engines=v["engines"], inference_engine_tensor_parallel_size=v["tp"],
        inference_engine_data_parallel_size=v["dp"], train_batch_size=v["train"], policy_mini_batch_size=v["mini"],
        micro_train_batch_size_per_gpu=v["micro"], n_samples_per_prompt=v["n"],
    )  # fmt: skip
    topo = topology(role, num_nodes=v["nodes"], gpus_per_node=v["width"])
    found = violations(topo, NO_KL)
    judged(found)
    if found:
        return
    profile = get_profile("fsdp")
    composed, _ = profile.compose(render_recipe(NO_KL, role, profile, 0))
    geo = Geometry.from_recipe(composed)
    assert geo.planned_gpus == v["nodes"] * v["width"]
    assert geo.physical_nodes(v["width"]) == v["nodes"]
    dp = geo.policy_dp
    assert dp is not None and geo.per_gpu_mini(dp) > 0
    # SkyRL floors mini*n/dp (it does not require an even split; see the rules' batch.* codes).
    assert geo.per_gpu_mini(dp) % v["micro"] == 0 and geo.per_gpu_train(dp) % geo.per_gpu_mini(dp) == 0
    assert geo.gradient_accumulation * v["micro"] == geo.per_gpu_mini(dp)
    assert geo.optimizer_steps * v["mini"] == v["train"]
    assert v["train"] % geo.tail_stride() == 0 and (v["train"] * v["n"]) % dp == 0  # no tail is trimmed


@settings(max_examples=300, deadline=None)
@given(
    values=st.lists(sizes, min_size=17, max_size=17),
    colocate=st.booleans(),
    strategy=st.sampled_from(["fsdp", "megatron"]),
)
def test_the_geometry_never_raises(values: list[int], colocate: bool, strategy: str) -> None:
    geo = Geometry(
        strategy, colocate, *values[:13], False, values[13], values[14], (values[15], values[16], 1), (1, 1, 1)
    )
    for g in (values[0], 8, 0, -8):
        geo.engines_per_node(g), geo.rollout_nodes(g), geo.physical_nodes(g)
    geo.policy_dp, geo.ref_dp, geo.gradient_accumulation, geo.optimizer_steps, geo.lcm_dp(), geo.tail_stride()
    geo.per_gpu_mini(values[1]), geo.per_gpu_train(values[2])


def test_zero_tensor_parallel_is_a_violation_not_a_zero_division() -> None:
    """Issue 11's reproducer: TP 0 used to divide by zero in the geometry."""
    geo = Geometry("fsdp", False, 4, 8, 4, 8, 4, 0, 1, 8, 1, 256, 64, 2, 8, False, 1, 1, (1, 1, 1), (1, 1, 1))
    assert geo.engine_gpus == 0 and geo.engines_per_node(8) is None and geo.rollout_nodes(8) is None
    v = only(violations(seed_topology(inference_engine_tensor_parallel_size=0)), "role_plan.non_positive")
    assert v.fields == ("role_plan.inference_engine_tensor_parallel_size",) and v.values == {"value": 0}


def test_underivable_numbers_are_none() -> None:
    def geo(**changes: Any) -> Geometry:
        values = dict(policy_nodes=4, policy_gpus_per_node=8, train_batch=256, mini_batch=64, micro_batch=2)
        values.update(changes)
        return Geometry(
            "fsdp", False, values["policy_nodes"], values["policy_gpus_per_node"], 4, 8, 4, 1, 1, 8, 1,
            values["train_batch"], values["mini_batch"], values["micro_batch"], 8, False, 1, 1, (1, 1, 1), (1, 1, 1),
        )  # fmt: skip

    assert (geo().policy_dp, geo().gradient_accumulation, geo().optimizer_steps) == (32, 8, 4)
    assert geo(policy_nodes=0).policy_dp is None and geo(policy_nodes=0).gradient_accumulation is None
    assert geo(micro_batch=0).gradient_accumulation is None and geo(micro_batch=-2).gradient_accumulation is None
    assert geo(mini_batch=0).optimizer_steps is None
    assert geo(policy_nodes=0).lcm_dp() is None and geo(policy_nodes=0).tail_stride() is None


def test_non_integer_recipe_numbers_are_violations_not_crashes() -> None:
    for value in (True, "ten", 2.5):
        tree = recipe(trainer={"max_training_steps": value}, generator={"max_input_length": value})
        found = codes(violations(seed_topology(), tree))
        assert found == ["recipe.max_training_steps", "recipe.input_length"], (value, found)


def test_structure_messages_name_the_kind_of_size() -> None:
    found = violations(topology(plan(train_batch_size=0), num_nodes=0))
    node = only(found, "topology.non_positive")
    assert "SkyRL topology num_nodes=0" in node.message and node.fix == "set topology.num_nodes to a positive count"
    size = only(found, "role_plan.non_positive")
    assert "SkyRL role plan train_batch_size=0" in size.message
    assert size.fix == "set role_plan.train_batch_size to a positive integer"


def test_sizes_beyond_the_bound_are_reported_with_the_sizes_alone() -> None:
    found = violations(seed_topology(train_batch_size=2**70, policy_mini_batch_size=0))
    assert codes(found) == ["role_plan.too_large", "role_plan.non_positive"]  # and nothing derived from them
    assert found[0].values == {"bits": 71} and "71-bit" in found[0].message
    found = violations(topology(num_nodes=-(2**63)))
    assert codes(found) == ["topology.too_large"]
    assert codes(violations(topology(plan(train_batch_size=MAX_SIZE, policy_mini_batch_size=32)))) != [
        "role_plan.too_large"
    ]


def test_megatron_sizes_must_be_positive() -> None:
    tree = recipe(trainer={"policy": {"megatron_config": {"pipeline_model_parallel_size": 0}}})
    v = only(violations(seed_topology(), tree, "megatron"), "strategy.megatron_non_positive")
    assert v.fields == ("config_yaml.trainer.policy.megatron_config.pipeline_model_parallel_size",)
    assert v.values == {"value": 0}
    etp = recipe(trainer={"policy": {"megatron_config": {"expert_tensor_parallel_size": -2}}})
    assert "strategy.megatron_non_positive" in codes(violations(seed_topology(), etp, "megatron"))
    assert "strategy.megatron_non_positive" not in codes(violations(seed_topology(), recipe(), "megatron"))


@settings(max_examples=300, deadline=None)
@given(n=st.integers(min_value=-5, max_value=30_000))
def test_divisors_are_exact_where_the_search_is_complete(n: int) -> None:
    assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=(DIVISOR_SEARCH + 1) ** 2, max_value=2**200))
def test_divisors_of_huge_numbers_are_the_searched_ones_and_their_cofactors(n: int) -> None:
    small = [d for d in range(1, DIVISOR_SEARCH + 1) if n % d == 0]
    assert divisors(n) == sorted(set(small + [n // d for d in small]))
    assert "not searched" in divisor_hint(n)


def test_divisor_hints_are_capped_and_say_what_is_missing() -> None:
    assert divisors(2**40) == [2**k for k in range(13)] + [2**k for k in range(28, 41)]  # 2**13..2**27 unsearched
    assert divisor_hint(2**40) == (
        "[1, 2, 4, 8, 16, 32, 64, 128, ..., 8589934592, 17179869184, 34359738368, 68719476736, 137438953472, "
        "274877906944, 549755813888, 1099511627776] (16 of 26 shown; divisors between 4096 and 268435456 not searched)"
    )
    assert divisors(HUGE_PRIME) == [1, HUGE_PRIME]
    assert divisor_hint(HUGE_PRIME) == f"[1, ~2**88] (divisors between {DIVISOR_SEARCH} and ~2**76 not searched)"
    assert divisor_hint(250) == "[1, 2, 5, 10, 25, 50, 125, 250]"
    assert divisor_hint(120) == "[1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 24, 30, 40, 60, 120]"  # 16: all listed
    assert divisor_hint(0) == "[]" and divisor_hint(-4) == "[]"
    assert divisor_hint(10**15 - 1).split(" (")[0].endswith(", 333333333333333, 999999999999999]")
    assert divisor_hint(10**15).split(" (")[0].endswith(", 500000000000000, ~2**49]")
    assert divisor_hint(720) == ("[1, 2, 3, 4, 5, 6, 8, 9, ..., 80, 90, 120, 144, 180, 240, 360, 720] (16 of 30 shown)")
    largest_complete = (DIVISOR_SEARCH + 1) ** 2 - 1
    assert divisors(largest_complete) == [d for d in range(1, largest_complete + 1) if largest_complete % d == 0]
    assert "not searched" not in divisor_hint(largest_complete)
    assert len(divisor_hint(5 * 10**7)) < 200


def test_a_large_batch_gets_a_bounded_fix() -> None:
    for train in (2**40 + 2, 5 * 10**7 + 1, 2**61 - 1):  # the last one prime
        v = only(violations(topology(plan(train_batch_size=train, policy_mini_batch_size=64))), "batch.train_mini")
        assert v.values == {"train": train, "mini": 64} and len(v.fix) < 400
