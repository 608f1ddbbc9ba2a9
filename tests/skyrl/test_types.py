"""The configuration objects refuse wrong types and out-of-range values at construction."""

from __future__ import annotations

import dataclasses

import pytest

from rlaunch.runtimes.registry import UnknownRuntimeError
from rlaunch.skyrl import (
    IrisSkyRLExecution,
    SkyRLCriticPlan,
    SkyRLRetentionPolicy,
    SkyRLRolePlan,
    SkyRLRuntime,
    SkyRLTopology,
)
from tests.support.specs import iris, plan

INT_FIELDS = [f.name for f in dataclasses.fields(SkyRLRolePlan) if f.name not in ("colocate_all", "critic")]


@pytest.mark.parametrize("name", INT_FIELDS)
@pytest.mark.parametrize("bad", [True, 8.0, "8", None])
def test_role_plan_refuses_non_int_for_every_count(name: str, bad: object) -> None:
    with pytest.raises(TypeError, match=rf"SkyRLRolePlan\.{name} must be an int, got {bad!r}"):
        plan(**{name: bad})


@pytest.mark.parametrize("bad", [True, 8, {"num_nodes": 1, "num_gpus_per_node": 8, "mini_batch_size": 32}])
def test_role_plan_critic_must_be_a_critic_plan(bad: object) -> None:
    with pytest.raises(TypeError, match=r"SkyRLRolePlan\.critic must be a SkyRLCriticPlan or None"):
        plan(critic=bad)


@pytest.mark.parametrize("name", ["num_nodes", "num_gpus_per_node", "mini_batch_size"])
def test_critic_plan_refuses_non_int(name: str) -> None:
    values: dict[str, object] = {"num_nodes": 1, "num_gpus_per_node": 8, "mini_batch_size": 32, name: 8.0}
    with pytest.raises(TypeError, match=rf"SkyRLCriticPlan\.{name} must be an int, got 8.0"):
        SkyRLCriticPlan(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [1, 0, "true", None])
def test_role_plan_colocate_all_must_be_a_bool(bad: object) -> None:
    with pytest.raises(TypeError, match=r"SkyRLRolePlan\.colocate_all must be true or false"):
        plan(colocate_all=bad)


def test_role_plan_has_no_defaults_but_the_optional_critic() -> None:
    defaulted = [f.name for f in dataclasses.fields(SkyRLRolePlan) if f.default is not dataclasses.MISSING]
    assert defaulted == ["critic"] and plan().critic is None
    with pytest.raises(TypeError):
        SkyRLRolePlan(colocate_all=True)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("field", "bad", "pattern"),
    [
        ("num_nodes", True, r"SkyRLTopology\.num_nodes must be an int"),
        ("num_nodes", 1.0, r"SkyRLTopology\.num_nodes must be an int"),
        ("gpus_per_node", "8", r"SkyRLTopology\.gpus_per_node must be an int"),
        ("gpus_per_node", False, r"SkyRLTopology\.gpus_per_node must be an int"),
        ("gpu_variant", "", r"SkyRLTopology\.gpu_variant must be a non-empty string"),
        ("gpu_variant", 100, r"SkyRLTopology\.gpu_variant must be a non-empty string"),
        ("role_plan", {"colocate_all": True}, r"SkyRLTopology\.role_plan must be a SkyRLRolePlan"),
    ],
)
def test_topology_refuses_wrong_types(field: str, bad: object, pattern: str) -> None:
    values = dict(num_nodes=1, gpus_per_node=8, gpu_variant="H100", role_plan=plan())
    values[field] = bad
    with pytest.raises(TypeError, match=pattern):
        SkyRLTopology(**values)


def test_role_plan_and_topology_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan().train_batch_size = 1  # type: ignore[misc]


def test_retention_accepts_one_to_five_checkpoints() -> None:
    assert SkyRLRetentionPolicy(resume_checkpoint_count=5).resume_checkpoint_count == 5
    assert SkyRLRetentionPolicy(resume_checkpoint_count=1).resume_checkpoint_count == 1
    assert SkyRLRetentionPolicy() == SkyRLRetentionPolicy(resume_checkpoint_count=2, temporary_storage_ttl_days=14)


@pytest.mark.parametrize("count", [6, 0, -1])
def test_retention_refuses_counts_outside_one_to_five(count: int) -> None:
    with pytest.raises(ValueError, match=rf"resume_checkpoint_count={count} must be between one and five"):
        SkyRLRetentionPolicy(resume_checkpoint_count=count)


@pytest.mark.parametrize("ttl", [0, -3])
def test_retention_ttl_must_be_positive(ttl: int) -> None:
    with pytest.raises(ValueError, match=rf"temporary_storage_ttl_days={ttl} must be positive"):
        SkyRLRetentionPolicy(temporary_storage_ttl_days=ttl)


@pytest.mark.parametrize("field", ["resume_checkpoint_count", "temporary_storage_ttl_days"])
def test_retention_refuses_non_ints(field: str) -> None:
    with pytest.raises(TypeError, match=rf"SkyRLRetentionPolicy\.{field} must be an int"):
        SkyRLRetentionPolicy(**{field: True})


def test_iris_target_and_parent_are_set_together() -> None:
    with pytest.raises(ValueError, match="target_cluster and parent_cluster_config must be set together"):
        iris(target_cluster="cw-example")
    with pytest.raises(ValueError, match="target_cluster and parent_cluster_config must be set together"):
        iris(parent_cluster_config="lib/iris/config/parent.yaml")


def test_iris_target_must_equal_cluster() -> None:
    with pytest.raises(ValueError, match=r"target_cluster='other' must equal cluster='cw-example'"):
        iris(target_cluster="other", parent_cluster_config="lib/iris/config/parent.yaml")
    federated = iris(target_cluster="cw-example", parent_cluster_config="lib/iris/config/parent.yaml")
    assert federated.route() == ("iris", "lib/iris/config/parent.yaml", "cw-example")


@pytest.mark.parametrize(
    ("change", "error", "pattern"),
    [
        ({"cpu": 0}, ValueError, r"cpu=0 must be positive"),
        ({"cpu": "96"}, TypeError, r"cpu must be a number"),
        ({"memory": "lots"}, ValueError, r"memory"),
        ({"max_retries": -1}, ValueError, r"max_retries=-1 cannot be negative"),
        ({"max_retries": True}, TypeError, r"max_retries must be an int"),
        ({"job_timeout_seconds": -5}, ValueError, r"job_timeout_seconds=-5 cannot be negative"),
        ({"coordinator_timeout_hours": 0}, ValueError, r"coordinator_timeout_hours=0 must be positive"),
        ({"cluster": ""}, TypeError, r"IrisSkyRLExecution\.cluster must be a non-empty string"),
        ({"wandb_entity": ""}, TypeError, r"wandb_entity must be a non-empty string"),
    ],
)
def test_execution_refuses_bad_placement_values(change: dict, error: type[Exception], pattern: str) -> None:
    with pytest.raises(error, match=pattern):
        iris(**change)


def test_execution_needs_cluster_fields() -> None:
    with pytest.raises(TypeError):
        IrisSkyRLExecution(cpu=1, memory="1GB", disk="1GB")  # type: ignore[call-arg]


def test_runtime_refuses_unknown_profile_listing_the_known_ones() -> None:
    with pytest.raises(UnknownRuntimeError, match=r"'fsdp3' is not registered; choose one of \[") as info:
        SkyRLRuntime("fsdp3")
    for known in ("'fsdp'", "'megatron'", "'trl-cpu'"):  # plugins registered by other tests may be listed too
        assert known in str(info.value)
    runtime = SkyRLRuntime("fsdp")
    assert len(runtime.source_digest) == 64
    assert runtime.__artifact_identity__() == {"profile": "fsdp", "source_digest": runtime.source_digest}
