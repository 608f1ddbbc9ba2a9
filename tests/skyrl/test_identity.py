"""Identity vs placement: what changes an RL step's fingerprint, what never does, and its deps."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest

from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.geometry import CRITIC_FROM_POLICY, CRITIC_KEYS
from rlaunch.runtimes import registry
from rlaunch.skyrl import (
    ArtifactDataSource,
    LocalSkyRLExecution,
    RaySkyRLExecution,
    SkyRLCriticPlan,
    SkyRLRetentionPolicy,
    SkyRLRolePlan,
    SkyRLTopology,
    SlurmSkyRLExecution,
    skyrl_step,
)
from rlaunch.skyrl.values.config_yaml import PLAN_KEYS
from tests.support.specs import DAY, WANDB_RECIPE, data_step, iris, model_step, recipe, seed_plan, spec


def fingerprint(**spec_overrides: Any) -> str:
    execution = spec_overrides.pop("execution", None) or iris()
    export_hf = spec_overrides.pop("export_hf", True)
    return skyrl_step(spec(**spec_overrides), execution, export_hf=export_hf).fingerprint


BASE = fingerprint()


def topo(n: int = 8, g: int = 8, **plan_changes: Any) -> SkyRLTopology:
    return SkyRLTopology(num_nodes=n, gpus_per_node=g, gpu_variant="H100", role_plan=seed_plan(**plan_changes))


# Every role-plan field, each with a valid plan that changes it (and only what the budget forces).
ROLE_PLAN_CHANGES: dict[str, SkyRLTopology] = {
    "colocate_all": topo(colocate_all=True, policy_num_nodes=8, num_inference_engines=8),
    "policy_num_nodes": topo(n=6, policy_num_nodes=2),
    "policy_num_gpus_per_node": topo(n=6, g=16, policy_num_gpus_per_node=16),
    "num_inference_engines": topo(n=6, num_inference_engines=2),
    "inference_engine_tensor_parallel_size": topo(
        inference_engine_tensor_parallel_size=2, inference_engine_data_parallel_size=4
    ),
    "inference_engine_pipeline_parallel_size": topo(
        inference_engine_pipeline_parallel_size=2, inference_engine_data_parallel_size=4
    ),
    "inference_engine_data_parallel_size": topo(n=6, inference_engine_data_parallel_size=4),
    "inference_engine_expert_parallel_size": topo(inference_engine_expert_parallel_size=8),
    "train_batch_size": topo(train_batch_size=128),
    "policy_mini_batch_size": topo(policy_mini_batch_size=32),
    "micro_train_batch_size_per_gpu": topo(micro_train_batch_size_per_gpu=4),
    "n_samples_per_prompt": topo(n_samples_per_prompt=4),
    "critic": topo(n=9, critic=SkyRLCriticPlan(num_nodes=1, num_gpus_per_node=8, mini_batch_size=64)),
}


def test_every_role_plan_field_has_a_case() -> None:
    assert set(ROLE_PLAN_CHANGES) == {f.name for f in dataclasses.fields(SkyRLRolePlan)}


@pytest.mark.parametrize("field", list(ROLE_PLAN_CHANGES))
def test_fingerprint_changes_with_every_role_plan_field(field: str) -> None:
    changed = ROLE_PLAN_CHANGES[field]
    assert getattr(changed.role_plan, field) != getattr(seed_plan(), field)
    assert fingerprint(topo=changed) != BASE


RENDERED_KEY = {
    "colocate_all": "trainer.placement.colocate_all",
    "policy_num_nodes": "trainer.placement.policy_num_nodes",
    "policy_num_gpus_per_node": "trainer.placement.policy_num_gpus_per_node",
    "num_inference_engines": "generator.inference_engine.num_engines",
    "inference_engine_tensor_parallel_size": "generator.inference_engine.tensor_parallel_size",
    "inference_engine_pipeline_parallel_size": "generator.inference_engine.pipeline_parallel_size",
    "inference_engine_data_parallel_size": "generator.inference_engine.data_parallel_size",
    "inference_engine_expert_parallel_size": "generator.inference_engine.expert_parallel_size",
    "train_batch_size": "trainer.train_batch_size",
    "policy_mini_batch_size": "trainer.policy_mini_batch_size",
    "micro_train_batch_size_per_gpu": "trainer.micro_train_batch_size_per_gpu",
    "n_samples_per_prompt": "generator.n_samples_per_prompt",
}


@pytest.mark.parametrize("field", list(ROLE_PLAN_CHANGES))
def test_every_role_plan_value_is_in_the_fingerprinted_document(field: str) -> None:
    """The field's own value (not only what the budget forces elsewhere) enters identity."""
    changed = ROLE_PLAN_CHANGES[field]
    config = skyrl_step(spec(topo=changed), iris()).fingerprint_config
    value = getattr(changed.role_plan, field)
    skyrl = config["launch_document"]["skyrl"]
    if field == "critic":
        assert {name: get_path(skyrl, key) for name, key in CRITIC_KEYS.items()} == dataclasses.asdict(value)
        assert get_path(skyrl, "trainer.critic.model.path") == CRITIC_FROM_POLICY
        return
    assert get_path(skyrl, RENDERED_KEY[field]) == value
    assert set(RENDERED_KEY.values()) <= set(PLAN_KEYS)


def test_a_plan_without_a_critic_keeps_the_identity_it_had_before_the_role_existed() -> None:
    """No `critic` key anywhere in the fingerprinted config of a plan without one (fingerprints of
    every existing run stay what they were: the 64-GPU example's are main's)."""
    config = skyrl_step(spec(), iris()).fingerprint_config
    assert "critic" not in config["topology"]["role_plan"]
    assert get_path(config["launch_document"]["skyrl"], "trainer.critic", None) is None


def _profile_copy(tmp_path, name: str) -> registry.RuntimeProfile:
    """The registered profile with a different lock: same strategy, another source digest."""
    original = registry.get_profile(name)
    directory = tmp_path / f"{name}-repinned"
    shutil.copytree(original.directory, directory)
    (directory / "lock.txt").write_text((Path(original.directory) / "lock.txt").read_text() + "extra-package==1.0\n")
    return dataclasses.replace(original, directory=directory)


def test_fingerprint_changes_with_the_runtime_profile_and_digest(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert fingerprint(profile="megatron") != BASE
    repinned = _profile_copy(tmp_path, "fsdp")
    assert repinned.source_digest != registry.get_profile("fsdp").source_digest
    monkeypatch.setitem(registry._registry, "fsdp", repinned)
    assert fingerprint() != BASE


@pytest.mark.parametrize(
    "change",
    [
        {"tree": recipe(trainer={"algorithm": {"kl_loss_coef": 0.002}})},
        {"tree": recipe(trainer={"ckpt_interval": 10})},
        {"model": model_step(version="2026.12.01")},
        {"model": model_step(name="models/qwen3-4b")},
        {"data": data_step(version="2026.12.01")},
        {"validation": data_step(name="data/gsm8k-test")},
        {"seed": 18},
        {"retention": SkyRLRetentionPolicy(resume_checkpoint_count=3)},
        {"export_hf": False},
        {"name": "checkpoints/gsm8k-grpo-b"},
        {"version": "2026.12.01"},
        {"compatible_checkpoint_digests": ("0" * 64,)},
    ],
    ids=lambda c: (
        next(iter(c)) + ("=" + str(next(iter(c.values()))) if next(iter(c)) in ("seed", "export_hf", "version") else "")
    ),
)
def test_fingerprint_changes_with_identity(change: dict[str, Any]) -> None:
    assert fingerprint(**change) != BASE


@pytest.mark.parametrize(
    "execution",
    [
        iris(cluster="other-cluster", cluster_config="lib/iris/config/other.yaml"),
        iris(target_cluster="cw-example", parent_cluster_config="lib/iris/config/parent.yaml"),
        iris(cpu=8, memory="64GB", disk="100GB"),
        iris(priority="batch"),
        iris(max_retries=0),
        iris(coordinator_timeout_hours=1, job_timeout_seconds=0),
        iris(coordinator_cpu=1, coordinator_memory="1GB", coordinator_disk="1GB"),
        iris(wandb_entity="another-lab"),
        iris(wandb_entity=None),
        LocalSkyRLExecution(),
        LocalSkyRLExecution(cpu=2, memory="8GB", disk="20GB", jobs_root="/somewhere"),
        RaySkyRLExecution(cpu=32, memory="256GB", disk="1TB", address="http://10.0.0.1:8265"),
        RaySkyRLExecution(cpu=32, memory="256GB", disk="1TB", wandb_entity="my-lab"),
        SlurmSkyRLExecution(cpu=32, memory="256GB", disk="1TB"),
        SlurmSkyRLExecution(
            cpu=16,
            memory="128GB",
            disk="1TB",
            partition="gpu",
            account="lab",
            qos="high",
            time_limit_minutes=600,
            constraint="a100&ib",
            gpu_gres="gpu:a100",
            exclusive=True,
            sbatch_options={"reservation": "rl"},
            jobs_root="/shared/rlaunch-jobs",
        ),  # fmt: skip
    ],
    ids=lambda e: type(e).__name__,
)
def test_fingerprint_ignores_placement(execution: Any) -> None:
    assert fingerprint(execution=execution) == BASE


def test_fingerprint_ignores_placement_with_wandb_too() -> None:
    a = skyrl_step(spec(tree=WANDB_RECIPE), iris(wandb_entity="lab-a")).fingerprint
    b = skyrl_step(spec(tree=WANDB_RECIPE), LocalSkyRLExecution(wandb_entity="lab-b", cpu=2)).fingerprint
    assert a == b != BASE


def test_fingerprint_is_stable_across_constructions() -> None:
    assert fingerprint() == fingerprint() == BASE


def test_deps_are_model_then_data_deduplicated_in_order() -> None:
    model, train, val = model_step(), data_step(), data_step(name="data/gsm8k-test")
    step = skyrl_step(spec(model=model, data=train, validation=val), iris())
    assert step.deps == (model, train, val)
    shared = skyrl_step(spec(model=model, data=train), iris())  # validation reads the train step too
    assert shared.deps == (model, train)
    many = spec(
        model=model,
        data=train,
        train_data=(
            ArtifactDataSource(train, "a.parquet"),
            ArtifactDataSource(val, "b.parquet"),
            ArtifactDataSource(train, "c.parquet"),
        ),
        validation_data=(ArtifactDataSource(val, "d"),),
    )
    assert skyrl_step(many, iris()).deps == (model, train, val)


def test_step_name_and_version_follow_the_spec() -> None:
    step = skyrl_step(spec(), iris())
    assert (step.name, step.version, step.identity) == ("checkpoints/gsm8k-grpo", DAY, f"checkpoints/gsm8k-grpo@{DAY}")
