"""Production shapes that must pass end to end, every violation at once, and a pure check_plan."""

from __future__ import annotations

import builtins
import io
import os
import pathlib

import fsspec
import pytest

from rlaunch.artifacts import StepContext
from rlaunch.launch_config import schema
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl import PreflightError, check_plan, skyrl_step
from tests.support.specs import BASE_RECIPE, codes, cpu_topology, iris, plan, planned, recipe, seed_plan, spec, topology

MEGATRON_TP2_PP2 = {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2}

SHAPES = {
    "1x8 colocated": (topology(plan()), BASE_RECIPE, "fsdp"),
    "2x8 colocated": (
        topology(
            plan(policy_num_nodes=2, num_inference_engines=8, inference_engine_tensor_parallel_size=2), num_nodes=2
        ),
        BASE_RECIPE,
        "fsdp",
    ),
    "4x8 + 4x8 disaggregated (64 GPUs)": (
        topology(seed_plan(), num_nodes=8),
        BASE_RECIPE,
        "fsdp",
    ),
    "megatron TP2 PP2 on 2x8": (
        topology(
            plan(policy_num_nodes=2, num_inference_engines=4, inference_engine_tensor_parallel_size=4), num_nodes=2
        ),
        recipe(trainer={"policy": {"megatron_config": MEGATRON_TP2_PP2}, "ref": {"megatron_config": MEGATRON_TP2_PP2}}),
        "megatron",
    ),
    "MoE EP8: 4 engines DP8 EP8 on 8x8": (
        topology(seed_plan(inference_engine_expert_parallel_size=8), num_nodes=8),
        BASE_RECIPE,
        "fsdp",
    ),
    "MoE EP8: 1 engine DP8 EP8 next to a 4x8 policy": (
        topology(seed_plan(num_inference_engines=1, inference_engine_expert_parallel_size=8), num_nodes=5),
        BASE_RECIPE,
        "fsdp",
    ),
    "trl-cpu smoke (1 slot)": (cpu_topology(), BASE_RECIPE, "trl-cpu"),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_production_shape_passes_and_renders_a_valid_document(name: str, prefix: str) -> None:
    topo, tree, profile = SHAPES[name]
    assert check_plan(topo, tree, profile) == []
    s = spec(topo=topo, tree=tree, profile=profile)
    step = skyrl_step(s, iris(), export_hf=True)
    assert len(step.fingerprint) == 64
    document = schema.from_dict(step.build_config(StepContext.for_run(step, prefix))["launch_document"])
    assert document.cluster.allocation.num_nodes == topo.num_nodes
    assert document.cluster.allocation.gpus_per_node == topo.gpus_per_node
    assert document.skyrl["trainer"]["strategy"] == get_profile(profile).strategy
    assert document.skyrl["trainer"]["placement"]["policy_num_nodes"] == topo.role_plan.policy_num_nodes


def test_megatron_shape_uses_its_own_model_parallel_for_dp() -> None:
    topo, _, _ = SHAPES["megatron TP2 PP2 on 2x8"]
    # The same plan with Megatron TP3 does not divide the 16-GPU world.
    bad = recipe(
        trainer={
            "policy": {"megatron_config": {"tensor_model_parallel_size": 3}},
            "ref": {"megatron_config": MEGATRON_TP2_PP2},
        }
    )
    assert "strategy.megatron_world" in codes(check_plan(topo, bad, "megatron"))
    # FSDP derives dp from the world alone: Megatron TP3 means nothing there.
    assert check_plan(topo, bad, "fsdp") == []


# --- every violation at once ----------------------------------------------------------------------

BROKEN = seed_plan(
    inference_engine_data_parallel_size=1,
    train_batch_size=250,
    micro_train_batch_size_per_gpu=3,
    inference_engine_expert_parallel_size=3,
)
BROKEN_RECIPE = recipe(
    trainer={"ckpt_path": "/ambient", "strategy": "megatron", "resume_mode": None},
    generator={"n_samples_per_prompt": 4},
)


def test_all_violations_are_reported_at_once() -> None:
    with pytest.raises(PreflightError) as info:
        planned(spec(topo=topology(BROKEN, num_nodes=8), tree=BROKEN_RECIPE))
    error = info.value
    assert isinstance(error, ValueError)
    assert set(error.codes) >= {
        "topology.gpu_budget",
        "engine.expert_parallel",
        "batch.train_mini",
        "batch.per_gpu_mini_micro",
        "batch.tail_stride",
        "recipe.disagrees_with_plan",
        "recipe.launcher_owned",
        "explicit.resume_mode",
        "runtime.strategy_mismatch",
    }
    assert error.codes == [v.code for v in error.violations]
    assert len(error.violations) >= 10
    text = str(error)
    assert text.startswith(f"{len(error.violations)} preflight violation(s):")
    for v in error.violations:
        assert v.line() in text
        assert v.violations == (v,)
    assert "config_yaml.trainer.ckpt_path" in error.fields and "role_plan.train_batch_size" in error.fields


def test_a_single_violation_is_raised_as_itself() -> None:
    with pytest.raises(PreflightError) as info:
        planned(spec(topo=topology(seed_plan(inference_engine_data_parallel_size=1), num_nodes=8)))
    assert info.value.code == "topology.gpu_budget"
    assert info.value.codes == ["topology.gpu_budget"]
    assert info.value.to_json()["values"] == {"planned": 36, "allocated": 64}


def test_combine_flattens_nested_errors() -> None:
    a = PreflightError("a.one", ["x"], "first", "fix x")
    b = PreflightError("b.two", ["y"], "second", "fix y")
    nested = PreflightError.combine(
        [PreflightError.combine([a, b]), PreflightError("c.three", ["z"], "third", "fix z")]
    )
    assert nested.codes == ["a.one", "b.two", "c.three"]
    assert nested.fields == ("x", "y", "z")


# --- purity ---------------------------------------------------------------------------------------


@pytest.fixture
def no_io(monkeypatch: pytest.MonkeyPatch):
    """Every file or fsspec access raises while the fixture is active."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"check_plan did I/O: {args!r}")

    def arm() -> None:
        for target, name in ((builtins, "open"), (io, "open"), (os, "open"), (os, "stat"), (os, "listdir"), (os, "scandir"),
                             (pathlib.Path, "open"), (pathlib.Path, "read_text"), (pathlib.Path, "read_bytes"), (pathlib.Path, "exists"),
                             (fsspec, "open"), (fsspec, "filesystem"), (fsspec.core, "url_to_fs")):  # fmt: skip
            monkeypatch.setattr(target, name, refuse)

    return arm


def test_check_plan_is_pure(no_io) -> None:
    broken = topology(BROKEN, num_nodes=8)
    cases = [(topo, tree, profile) for topo, tree, profile in SHAPES.values()] + [
        (broken, BROKEN_RECIPE, "fsdp"),
        (cpu_topology(gpu_variant="H100"), recipe(trainer={"max_tokens_per_microbatch": 7}), "trl-cpu"),
    ]
    # Loading a profile's definition happens once per process, like an import; then nothing is read.
    expected = [check_plan(topo, tree, profile) for topo, tree, profile in cases]
    no_io()
    for (topo, tree, profile), before in zip(cases, expected):
        again = check_plan(topo, tree, profile)
        assert [v.line() for v in again] == [v.line() for v in before]
    assert [bool(e) for e in expected] == [False] * len(SHAPES) + [True, True]


def test_preflight_error_survives_pickling() -> None:
    import pickle

    with pytest.raises(PreflightError) as info:
        planned(spec(topo=topology(BROKEN, num_nodes=8), tree=BROKEN_RECIPE))
    again = pickle.loads(pickle.dumps(info.value))
    assert again.codes == info.value.codes
    assert str(again) == str(info.value)
    single = pickle.loads(pickle.dumps(info.value.violations[0]))
    assert single.violations == (single,) and single.values == info.value.violations[0].values
