"""Composing a recipe onto the base config, and the role geometry both sides derive from it."""

from __future__ import annotations

import pytest

from rlaunch import storage
from rlaunch.launch_config.composition import compose, get_path, has_path, leaves, set_path
from rlaunch.launch_config.geometry import Geometry
from rlaunch.runs import layout
from rlaunch.runs.resume import foreign_checkpoint, refusal
from rlaunch.runtimes.registry import get_profile


@pytest.fixture(scope="module")
def base() -> dict:
    return get_profile("fsdp").base_config()


def test_dotted_paths() -> None:
    tree: dict = {}
    set_path(tree, "trainer.placement.colocate_all", False)
    assert tree == {"trainer": {"placement": {"colocate_all": False}}}
    assert get_path(tree, "trainer.placement.colocate_all") is False
    assert has_path(tree, "trainer.placement") and not has_path(tree, "trainer.seed")
    assert get_path(tree, "trainer.seed", 42) == 42
    with pytest.raises(KeyError):
        get_path(tree, "trainer.seed")
    with pytest.raises(ValueError, match="trainer.placement must be a mapping"):
        set_path({"trainer": {"placement": 3}}, "trainer.placement.colocate_all", True)
    assert dict(leaves({"a": {"b": 1, "c": [1, 2]}, "d": {}})) == {"a.b": 1, "a.c": [1, 2], "d": {}}


def test_compose_lays_the_recipe_over_a_copy_of_the_base(base: dict) -> None:
    composed, problems = compose(base, {"trainer": {"seed": 3, "policy": {"optimizer_config": {"lr": 1}}}})
    assert problems == []
    assert composed["trainer"]["seed"] == 3
    assert composed["trainer"]["policy"]["optimizer_config"]["lr"] == 1  # an int is a number
    assert composed["trainer"]["epochs"] == base["trainer"]["epochs"]
    assert base["trainer"]["seed"] == 42


def test_compose_reports_unknown_keys_and_types_by_path(base: dict) -> None:
    _, problems = compose(
        base, {"trainer": {"seeed": 1, "seed": "1", "max_training_steps": "x", "algorithm": {"use_kl_loss": 0}}}
    )
    found = {(p.code, p.path) for p in problems}
    assert found == {
        ("recipe.unknown_key", "trainer.seeed"),
        ("recipe.type_mismatch", "trainer.seed"),
        ("recipe.type_mismatch", "trainer.algorithm.use_kl_loss"),
    }  # max_training_steps defaults to null: any type composes (the preflight checks it)
    unknown = next(p for p in problems if p.code == "recipe.unknown_key")
    assert unknown.fix == "did you mean trainer.seed?"


def _composed(base: dict, **trainer: object) -> Geometry:
    recipe = {
        "trainer": {"strategy": "fsdp", "placement": {"colocate_all": False, "policy_num_nodes": 4, "policy_num_gpus_per_node": 8, "ref_num_nodes": 4, "ref_num_gpus_per_node": 8},
                    "train_batch_size": 256, "policy_mini_batch_size": 64, "micro_train_batch_size_per_gpu": 2, **trainer},
        "generator": {"n_samples_per_prompt": 8, "inference_engine": {"num_engines": 4, "tensor_parallel_size": 1, "pipeline_parallel_size": 1, "data_parallel_size": 8}},
    }  # fmt: skip
    composed, problems = compose(base, recipe)
    assert problems == []
    return Geometry.from_recipe(composed)


def test_geometry_of_the_64_gpu_plan(base: dict) -> None:
    geo = _composed(base)
    assert (geo.policy_world, geo.engine_slice, geo.engine_gpus, geo.rollout_gpus, geo.planned_gpus) == (
        32,
        1,
        8,
        32,
        64,
    )
    assert geo.rollout_nodes(8) == 4 and geo.physical_nodes(8) == 8
    assert geo.policy_dp == 32 and geo.ref_dp == 32 and geo.use_reference
    assert geo.per_gpu_mini(32) == 16 and geo.per_gpu_train(32) == 64
    assert geo.lcm_dp() == 32 and geo.tail_stride() == 4


def test_the_fully_async_trainer_trims_no_tail(base: dict) -> None:
    """SkyRL trims the tail in `RayPPOTrainer.train` only; the fully-async trainer has no stride."""
    assert _composed(base).trims_tail
    fully_async = _composed(base, fully_async={"enabled": True})
    assert not fully_async.trims_tail and fully_async.lcm_dp() == 32 and fully_async.tail_stride() is None


def test_geometry_data_parallel_per_strategy(base: dict) -> None:
    assert _composed(base, policy={"sequence_parallel_size": 4}).policy_dp == 8
    assert _composed(base, policy={"sequence_parallel_size": 3}).policy_dp is None  # does not divide 32
    megatron = _composed(
        base,
        strategy="megatron",
        policy={"megatron_config": {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2}},
    )
    assert megatron.policy_dp == 8 and megatron.ref_dp == 32 and megatron.lcm_dp() == 32
    assert (
        _composed(base, strategy="megatron", policy={"megatron_config": {"tensor_model_parallel_size": 3}}).policy_dp
        is None
    )


def test_resume_refuses_a_checkpoint_of_another_digest(prefix: str) -> None:
    root = storage.join(prefix, "ckpts")
    run = "f" * 64
    assert foreign_checkpoint(root, "a" * 64, run) is None  # nothing to resume
    storage.write_json_atomic(
        storage.join(layout.checkpoint_dir(root, 30), layout.CHECKPOINT_META),
        {"runtime_digest": "b" * 64, "run_fingerprint": run},
    )
    storage.write_text_atomic(storage.join(root, layout.LATEST_MARKER), "30")
    info = foreign_checkpoint(root, "a" * 64, run)
    assert info is not None and info.step == 30
    text = refusal(info, "a" * 64, run)
    assert (
        "step 30" in text
        and "b" * 16 in text
        and "fresh RL artifact version" in text
        and "compatible_checkpoint_digests" in text
    )
    assert foreign_checkpoint(root, "b" * 64, run) is None
    assert foreign_checkpoint(root, "a" * 64, run, compatible=["b" * 64]) is None
