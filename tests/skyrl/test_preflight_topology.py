"""Role arithmetic: positive dimensions, the policy footprint, engine geometry and the GPU budget.

One test per rule, each with the numbers of the rule, asserting the violation code, the field
path(s) and that the message names the numbers and the fix says what to change.
"""

from __future__ import annotations

from rlaunch.skyrl import SkyRLTopology
from tests.support.specs import assert_useful, codes, only, plan, seed_topology, topology, violations


def policy_width(gpus: int) -> SkyRLTopology:
    """The colocated plan on one 8-GPU node with a policy (and engines) `gpus` wide."""
    return topology(plan(policy_num_gpus_per_node=gpus, num_inference_engines=gpus))


def engines(count: int, *, tp: int = 1, pp: int = 1, dp: int = 1) -> SkyRLTopology:
    """The colocated 1 x 8 plan with `count` inference engines of TP x PP x DP."""
    return topology(
        plan(
            num_inference_engines=count,
            inference_engine_tensor_parallel_size=tp,
            inference_engine_pipeline_parallel_size=pp,
            inference_engine_data_parallel_size=dp,
        )
    )


def test_dimensions_must_be_positive() -> None:
    topo = topology(plan(train_batch_size=0, inference_engine_expert_parallel_size=-1), num_nodes=0)
    found = violations(topo)
    node = [v for v in found if v.code == "topology.non_positive"]
    assert [v.fields for v in node] == [("topology.num_nodes",)]
    assert_useful(node[0], "num_nodes=0 must be positive")
    plan_hits = {v.fields: v for v in found if v.code == "role_plan.non_positive"}
    assert set(plan_hits) == {("role_plan.train_batch_size",), ("role_plan.inference_engine_expert_parallel_size",)}
    assert_useful(plan_hits[("role_plan.train_batch_size",)], "train_batch_size=0 must be positive")
    assert_useful(
        plan_hits[("role_plan.inference_engine_expert_parallel_size",)], "inference_engine_expert_parallel_size=-1"
    )
    # Derived arithmetic over non-positive numbers is not attempted (no ZeroDivisionError, no noise).
    assert not [c for c in codes(found) if c.startswith(("batch.", "engine."))]


def test_every_role_plan_count_is_checked_for_positivity() -> None:
    for name in ("policy_num_nodes", "policy_num_gpus_per_node", "num_inference_engines", "inference_engine_tensor_parallel_size",
                 "inference_engine_pipeline_parallel_size", "inference_engine_data_parallel_size", "train_batch_size",
                 "policy_mini_batch_size", "micro_train_batch_size_per_gpu", "n_samples_per_prompt"):  # fmt: skip
        v = only(violations(topology(plan(**{name: 0}))), "role_plan.non_positive")
        assert v.fields == (f"role_plan.{name}",)


def test_policy_nodes_must_fit_the_topology() -> None:
    v = only(violations(topology(plan(policy_num_nodes=2))), "role_plan.policy_nodes_exceed_topology")
    assert v.fields == ("role_plan.policy_num_nodes", "topology.num_nodes")
    assert_useful(v, "policy_num_nodes=2", "1 node")
    assert v.values == {"policy_num_nodes": 2, "num_nodes": 1}


def test_policy_gpus_per_node_must_fit_one_node() -> None:
    v = only(violations(policy_width(16)), "role_plan.policy_gpus_exceed_node")
    assert v.fields == ("role_plan.policy_num_gpus_per_node", "topology.gpus_per_node")
    assert_useful(v, "policy_num_gpus_per_node=16", "8 GPUs")


def test_node_width_equals_policy_width() -> None:
    v = only(violations(policy_width(4)), "role_plan.policy_width_mismatch")
    assert v.fields == ("role_plan.policy_num_gpus_per_node", "topology.gpus_per_node")
    assert_useful(v, "policy_num_gpus_per_node=4", "gpus_per_node=8")
    assert "policy_num_gpus_per_node=8" in v.fix


def test_colocated_engine_slice_divides_a_node() -> None:
    # TP3 on 8-GPU nodes: a TP x PP slice would straddle the node boundary.
    v = only(
        violations(topology(plan(num_inference_engines=2, inference_engine_tensor_parallel_size=3))),
        "engine.colocated_slice",
    )
    assert v.fields == (
        "role_plan.inference_engine_tensor_parallel_size",
        "role_plan.inference_engine_pipeline_parallel_size",
    )
    assert_useful(v, "TP*PP=3", "gpus_per_node=8")
    assert "[1, 2, 4, 8]" in v.fix


def test_colocated_pipeline_slice_divides_a_node() -> None:
    v = only(violations(engines(2, pp=3)), "engine.colocated_slice")
    assert_useful(v, "TP*PP=3")


def test_colocated_engines_use_exactly_the_policy_gpus() -> None:
    v = only(violations(engines(3, tp=2)), "engine.colocated_gpu_mismatch")
    assert v.fields == ("role_plan.num_inference_engines", "role_plan.inference_engine_data_parallel_size")
    assert_useful(v, "policy=8, rollout=6", "3 engines x TP2 x PP1 x DP1")
    assert v.values == {"policy": 8, "rollout": 6}
    assert "equal 8" in v.fix


def test_colocated_engine_ranks_count_dp() -> None:
    # slice = TP x PP = 2; ranks = slice x DP = 4; 2 engines x 4 = 8 GPUs = the policy: valid.
    assert violations(engines(2, tp=2, dp=2)) == []
    # ... and DP 4 doubles it to 16 GPUs: refused.
    v = only(violations(engines(2, tp=2, dp=4)), "engine.colocated_gpu_mismatch")
    assert_useful(v, "policy=8, rollout=16")


def test_disaggregated_engine_fits_one_node() -> None:
    topo = topology(
        plan(
            colocate_all=False,
            num_inference_engines=1,
            inference_engine_tensor_parallel_size=2,
            inference_engine_data_parallel_size=8,
        ),
        num_nodes=3,
    )
    v = only(violations(topo), "engine.exceeds_node")
    assert v.fields == (
        "role_plan.inference_engine_tensor_parallel_size",
        "role_plan.inference_engine_pipeline_parallel_size",
        "role_plan.inference_engine_data_parallel_size",
    )
    assert_useful(v, "TP*PP*DP=16", "gpus_per_node=8")
    assert "gpu_budget" not in " ".join(codes(violations(topo)))  # 8 + 16 = 24 = 3 x 8: only the fit is wrong


def test_disaggregated_engines_never_straddle_nodes() -> None:
    # 8 engines of TP3 = 24 GPUs = 3 nodes' worth, but only two 3-GPU engines fit on an 8-GPU node.
    topo = topology(
        plan(colocate_all=False, num_inference_engines=8, inference_engine_tensor_parallel_size=3), num_nodes=4
    )
    v = only(violations(topo), "engine.rollout_packing")
    assert v.fields == ("role_plan.num_inference_engines",)
    assert_useful(v, "8 engines of 3 GPUs need 4 whole node(s)", "3 remain")


def test_expert_parallel_divides_tp_times_dp() -> None:
    v = only(violations(seed_topology(inference_engine_expert_parallel_size=3)), "engine.expert_parallel")
    assert v.fields == ("role_plan.inference_engine_expert_parallel_size",)
    assert_useful(v, "TP*DP=8", "EP=3")
    assert "[1, 2, 4, 8]" in v.fix


def test_skyrl_expert_parallel_equals_tp_times_dp_when_above_one() -> None:
    v = only(violations(seed_topology(inference_engine_expert_parallel_size=4)), "engine.expert_parallel_skyrl")
    assert v.fields == ("role_plan.inference_engine_expert_parallel_size",)
    assert_useful(v, "EP=4", "TP*DP=8")
    assert "EP=8" in v.fix
    assert violations(seed_topology(inference_engine_expert_parallel_size=8)) == []


def test_exact_gpu_budget_seed_example() -> None:
    # The seed's 64-GPU plan: 8 x 8, policy 4 x 8 disaggregated, 4 engines TP1 DP8 -> 32 + 32.
    assert violations(seed_topology()) == []
    # The same plan with rollout DP 1 describes 32 + 4 = 36 GPUs of 64.
    found = violations(seed_topology(inference_engine_data_parallel_size=1))
    assert codes(found) == ["topology.gpu_budget"]
    v = found[0]
    assert v.fields == ("role_plan", "topology.num_nodes", "topology.gpus_per_node")
    assert_useful(v, "36 GPUs", "policy 32 + rollout 4", "allocates 64 (8 nodes x 8)")
    assert v.values == {"planned": 36, "allocated": 64}


def test_exact_gpu_budget_refuses_overcommit_and_colocated_slack() -> None:
    over = only(violations(seed_topology(num_inference_engines=5)), "topology.gpu_budget")
    assert_useful(over, "72 GPUs", "allocates 64")
    # Colocated: the policy alone must cover the allocation (1 node of policy on a 2-node topology).
    slack = only(violations(topology(plan(), num_nodes=2)), "topology.gpu_budget")
    assert_useful(slack, "8 GPUs", "allocates 16 (2 nodes x 8)")
