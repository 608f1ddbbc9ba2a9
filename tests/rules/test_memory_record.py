"""The memory table as the run record and `--plan-format json` keep it (`MemoryTable.as_dict`),
and a Megatron role's shard of the parameters with the expert sizes a recipe leaves out."""

from __future__ import annotations

import dataclasses

import pytest

from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules import memory
from rlaunch.rules.devices import GIB, Device, device, host_slot
from rlaunch.rules.memory import training
from rlaunch.rules.model_shape import Architecture, from_hf_config
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl import ModelFacts
from rlaunch.skyrl.preflight import subject_of
from rlaunch.skyrl.values.config_yaml import render_recipe
from tests.support.built_counts import BASE
from tests.support.specs import BASE_RECIPE, cpu_topology

H100 = device("H100")


def test_a_sized_table_keeps_device_rows_and_kv_cache_in_gib() -> None:
    assert H100 is not None
    kv = memory.KvCapacity(
        device=H100.bytes,
        budget=72 * GIB,
        weights=16 * GIB,
        overhead=4 * GIB,
        bytes_per_token=128 * 1024,
        max_model_len=3000,
    )
    row = memory.Row("policy", "model states", 30 * GIB, H100.bytes, certain=20 * GIB, detail="FSDP over 8 GPUs")
    table = memory.MemoryTable(H100, (row,), kv, ("the critic: not sized",))
    assert table.as_dict() == {
        "device": {"name": "H100", "capacity_gib": 79.22},
        "rows": [
            {
                "role": "policy",
                "phase": "model states",
                "estimate_gib": 30.0,
                "capacity_gib": 79.22,
                "headroom_gib": 49.22,
                "certain_gib": 20.0,
                "status": "ok",
                "detail": "FSDP over 8 GPUs",
            }
        ],
        "kv_cache": {
            "budget_gib": 72.0,
            "available_gib": 52.0,
            "tokens": kv.tokens,
            "max_model_len": 3000,
            "sequences": round(kv.sequences, 2),
        },
        "unsized": ["the critic: not sized"],
    }
    assert kv.tokens == 52 * GIB // (128 * 1024) // 16 * 16  # whole blocks of 16 tokens
    assert (
        table.as_dict()["kv_cache"]["sequences"] == 141.99 == round(kv.tokens / 3000, 2) != round(kv.tokens / 3000, 3)
    )


def test_an_unsized_table_keeps_why() -> None:
    assert memory.MemoryTable(None, unsized=("no model",)).as_dict() == {
        "device": None,
        "rows": [],
        "kv_cache": None,
        "unsized": ["no model"],
    }


MOE = {
    **BASE,
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 128,
    "num_experts": 8,
    "num_experts_per_tok": 2,
}


def test_a_megatron_shard_splits_dense_over_tp_pp_and_experts_over_ep_etp_pp() -> None:
    arch = from_hf_config(MOE)
    assert isinstance(arch, Architecture)
    experts = arch.params.experts
    dense = arch.params.total - experts
    keys = memory.Keys(
        {
            "trainer": {
                "policy": {"megatron_config": {"expert_model_parallel_size": 2, "expert_tensor_parallel_size": 4}}
            }
        }
    )
    shard = training._megatron(arch, keys, "policy", (2, 3, 1))
    assert (shard.dense, shard.experts, shard.ep, shard.etp) == (dense / 6, experts / (2 * 4 * 3), 2, 4)
    # a recipe that leaves the expert sizes out: no expert parallelism, experts split like the dense TP
    bare = training._megatron(arch, memory.Keys({}), "ref", (2, 3, 1))
    assert (bare.dense, bare.experts, bare.ep, bare.etp) == (dense / 6, experts / (1 * 2 * 3), 1, 2)


def test_a_cpu_slot_is_its_share_of_the_nodes_host_memory() -> None:
    slot = host_slot(10 * GIB + 2, 4)
    assert slot == Device("cpu slot", (10 * GIB + 2) // 4, "host memory per node / 4 slots")
    assert host_slot(3, 3) is not None and host_slot(3, 3).bytes == 1  # type: ignore[union-attr]
    assert host_slot(GIB, 1) == Device("cpu slot", GIB, "host memory per node / 1 slots")
    assert host_slot(None, 4) is None and host_slot(0, 4) is None
    assert host_slot(GIB, 0) is None and host_slot(GIB, -1) is None


@pytest.mark.parametrize("name", ["H100", "h100", "H100-80GB", "h100_80gb", "H100 80GB"])
def test_a_gpu_is_found_however_its_name_is_written(name: str) -> None:
    found = device(name)
    assert found is not None and found.bytes == int(79.22 * GIB) and found.sm == 90


@pytest.mark.parametrize(("fsdp_size", "shard"), [(None, 8), (-1, 8), (0, 8), (1, 1), (4, 4), (8, 8), (9, 8)])
def test_fsdp_shards_over_its_size_when_it_is_one_of_the_world(fsdp_size: int | None, shard: int) -> None:
    keys = {} if fsdp_size is None else {"trainer": {"policy": {"fsdp_config": {"fsdp_size": fsdp_size}}}}
    assert training._fsdp_shard(memory.Keys(keys), "policy", 8) == shard
    assert training._fsdp_shard(memory.Keys({}), "policy", 0) == 1


def cpu_table(host_memory_bytes: int | None) -> memory.MemoryTable:
    """A trl-cpu plan of one node and one slot, sized with a small Qwen2's config."""
    profile, topo = get_profile("trl-cpu"), cpu_topology()
    model = ModelFacts.from_hf_config({**BASE, "model_type": "qwen2", "intermediate_size": 512})
    subject = subject_of(topo, BASE_RECIPE, profile, 17, model)
    subject = dataclasses.replace(subject, host_memory_bytes=host_memory_bytes)
    composed, _ = profile.compose(render_recipe(BASE_RECIPE, topo.role_plan, profile, 17))
    return memory.table_for(subject, Geometry.from_recipe(composed), composed)


def test_a_cpu_plan_is_sized_against_its_share_of_host_memory() -> None:
    table = cpu_table(4 * GIB)
    assert table.device == Device("cpu slot", 4 * GIB, "host memory per node / 1 slots")
    assert [(r.role, r.phase) for r in table.rows] == [("policy", "model states"), ("policy", "training step")]
    assert cpu_table(None).as_dict() == {
        "device": None,
        "rows": [],
        "kv_cache": None,
        "unsized": ["cannot size the device: host memory per CPU slot is not known (no allocation)"],
    }


def test_a_plan_without_a_known_architecture_says_so() -> None:
    topo, profile = cpu_topology(), get_profile("trl-cpu")
    subject = subject_of(topo, BASE_RECIPE, profile, 17, None)
    composed, _ = profile.compose(render_recipe(BASE_RECIPE, topo.role_plan, profile, 17))
    table = memory.table_for(subject, Geometry.from_recipe(composed), composed)
    assert table.unsized == (
        "cannot size the model: the model's architecture is not known (no config.json facts recorded)",
    )
