"""The memory tables a researcher reads, pinned whole: every row's estimate, certain part, capacity,
status and detail, its terms, and the engine's KV capacity, for plans that reach each branch of the
model (colocated FSDP with a reference, disaggregated engines, Megatron over MoE experts, MLA and
sliding-window engines, a quantized checkpoint, a vision tower, packed micro batches, a CPU slot,
an engine quantized online and offloading weights, GLM-4.7-Flash, Qwen3-VL-MoE and Qwen3-Next).

The numbers are the model's, not evidence of it: the evidence is PyTorch's own tracker
(tests/runtimes/test_memtracker.py), vLLM's published start-up logs (test_memory_model.py) and the
GPU grid (benchmarks/memory_fit.py). This file catches a change nobody meant: a term dropped, a
factor moved, a detail that no longer says what was sized. After a change that is meant, rewrite
the golden file with `RLAUNCH_UPDATE_GOLDEN=1 pytest tests/rules/test_memory_golden.py` and review
its diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules import memory
from rlaunch.rules.devices import GIB, device, host_slot
from rlaunch.skyrl import ModelFacts, SkyRLCriticPlan
from tests.rules.test_memory import QWEN3_14B, composed_of, one_node
from tests.rules.test_memory_model import (
    DEEPSEEK_V2_LITE,
    GEMMA2_9B,
    GPT_OSS_20B,
    QWEN3_30B_A3B,
    QWEN3_235B_A22B_FP8,
    QWEN25_VL_7B,
)
from tests.rules.test_rollout_knobs import GLM47_FLASH, QWEN3_NEXT_80B, QWEN3_VL_30B_A3B
from tests.support.specs import LLAMA_31_8B, cpu_topology, plan, recipe, seed_plan, topology

GOLDEN = Path(__file__).with_name("golden") / "memory_tables.json"
KL = {"algorithm": {"use_kl_loss": True}}

# name: (config.json, topology, recipe sections, profile)
CASES: dict[str, tuple[dict[str, Any], Any, dict[str, Any], str]] = {
    "llama-8b colocated 8xH100, reference": (LLAMA_31_8B, topology(), {"trainer": KL}, "fsdp"),
    "qwen3-14b seed plan, disaggregated engines, offloaded reference": (
        QWEN3_14B,
        topology(seed_plan(), num_nodes=8),
        {"trainer": {**KL, "ref": {"fsdp_config": {"cpu_offload": True, "fsdp_size": 8}}}},
        "fsdp",
    ),
    "qwen3-14b one node of 4 L40S, a token budget per micro batch": (
        QWEN3_14B,
        one_node(4, "L40S"),
        {"trainer": {"max_tokens_per_microbatch": 6000}},
        "fsdp",
    ),
    "qwen3-30b-a3b megatron EP4 ETP1 TP2, reference": (
        QWEN3_30B_A3B,
        topology(),
        {
            "trainer": {
                **KL,
                "strategy": "megatron",
                "policy": {
                    "megatron_config": {
                        "tensor_model_parallel_size": 2,
                        "expert_model_parallel_size": 4,
                        "expert_tensor_parallel_size": 1,
                    }
                },
                "ref": {
                    "megatron_config": {"tensor_model_parallel_size": 2, "expert_model_parallel_size": 4},
                    "fsdp_config": {"cpu_offload": True},  # not Megatron's: no offload
                },
                "micro_forward_batch_size_per_gpu": 2,
            }
        },
        "megatron",
    ),
    "llama-8b colocated, no reference, forward micro batches of 4": (
        LLAMA_31_8B,
        topology(),
        {"trainer": {"algorithm": {"use_kl_loss": False}, "micro_forward_batch_size_per_gpu": 4}},
        "fsdp",
    ),
    "llama-8b reference in Ulysses groups of 2, forward micro batches of 2": (
        LLAMA_31_8B,
        topology(),
        {"trainer": {**KL, "micro_forward_batch_size_per_gpu": 2, "ref": {"sequence_parallel_size": 2}}},
        "fsdp",
    ),
    "qwen3-14b GAE with a colocated critic": (
        QWEN3_14B,
        topology(plan(critic=SkyRLCriticPlan(num_nodes=1, num_gpus_per_node=8, mini_batch_size=32))),
        {"trainer": {"algorithm": {"advantage_estimator": "gae", "use_kl_loss": False}}},
        "fsdp",
    ),
    "qwen3-14b GAE with a dedicated critic and a reference": (
        QWEN3_14B,
        topology(seed_plan(critic=SkyRLCriticPlan(num_nodes=1, num_gpus_per_node=8, mini_batch_size=64)), num_nodes=9),
        {"trainer": {"algorithm": {"advantage_estimator": "gae", "use_kl_loss": True}}},
        "fsdp",
    ),
    "llama-8b padded, offloaded, no checkpointing, eager fp32 engines with a small budget": (
        LLAMA_31_8B,
        topology(),
        {
            "trainer": {
                "remove_microbatch_padding": False,
                "gradient_checkpointing": False,
                "policy": {"fsdp_config": {"cpu_offload": True}},
            },
            "generator": {
                "max_input_length": 2048,
                "inference_engine": {
                    "enforce_eager": True,
                    "model_dtype": "float32",
                    "gpu_memory_utilization": 0.6,
                    "max_num_seqs": 64,
                    "max_num_batched_tokens": 4096,
                    "engine_init_kwargs": {"max_model_len": 6144},
                },
            },
        },
        "fsdp",
    ),
    "qwen3-14b LoRA rank 1 policy, fsdp_size 4, max_input_length": (
        QWEN3_14B,
        topology(),
        {
            "trainer": {**KL, "policy": {"model": {"lora": {"rank": 1}}, "fsdp_config": {"fsdp_size": 4}}},
            "generator": {"max_input_length": 3000},  # an engine of max_input_length + max_generate_length
        },
        "fsdp",
    ),
    "qwen3-30b-a3b engines of TP 2 x PP 2 with expert parallelism": (
        QWEN3_30B_A3B,
        topology(
            plan(
                num_inference_engines=2,
                inference_engine_tensor_parallel_size=2,
                inference_engine_pipeline_parallel_size=2,
                inference_engine_expert_parallel_size=2,
            )
        ),
        {},
        "fsdp",
    ),
    "gpt-oss-20b mxfp4 engine on H100 (Hopper's padding)": (GPT_OSS_20B, topology(), {}, "fsdp"),
    "gpt-oss-20b mxfp4 engines of TP 2 (each expert's width split)": (
        GPT_OSS_20B,
        topology(plan(num_inference_engines=4, inference_engine_tensor_parallel_size=2)),
        {},
        "fsdp",
    ),
    "qwen3-30b-a3b engines of DP 2 with expert parallelism 2": (
        QWEN3_30B_A3B,
        topology(
            plan(
                num_inference_engines=4, inference_engine_data_parallel_size=2, inference_engine_expert_parallel_size=2
            )
        ),
        {},
        "fsdp",
    ),
    "qwen3-30b-a3b megatron PP 2 with the optimizer offloaded, LoRA-free": (
        QWEN3_30B_A3B,
        topology(),
        {
            "trainer": {
                "strategy": "megatron",
                "algorithm": {"use_kl_loss": False},
                "policy": {
                    "megatron_config": {
                        "pipeline_model_parallel_size": 2,
                        "expert_model_parallel_size": 2,
                        "optimizer_config_kwargs": {"optimizer_cpu_offload": True},
                    }
                },
            }
        },
        "megatron",
    ),
    "deepseek-v2-lite MLA engine": (DEEPSEEK_V2_LITE, topology(), {}, "fsdp"),
    "gemma2-9b sliding windows": (GEMMA2_9B, topology(gpu_variant="A100-80GB"), {}, "fsdp"),
    "gpt-oss-20b mxfp4 engine on L40S": (GPT_OSS_20B, topology(gpu_variant="L40S"), {}, "fsdp"),
    "qwen3-235b-a22b fp8 on 8xH200": (QWEN3_235B_A22B_FP8, topology(gpu_variant="H200"), {}, "fsdp"),
    "qwen2.5-vl-7b vision tower, fp8_inc KV": (
        QWEN25_VL_7B,
        topology(),
        {"generator": {"inference_engine": {"engine_init_kwargs": {"kv_cache_dtype": "fp8_inc"}}}},
        "fsdp",
    ),
    "qwen3-30b-a3b fp8 online engine, 4 GiB offloaded to the CPU": (
        QWEN3_30B_A3B,
        topology(),
        {"generator": {"inference_engine": {"engine_init_kwargs": {"quantization": "fp8", "cpu_offload_gb": 4}}}},
        "fsdp",
    ),
    "glm-4.7-flash MLA experts": (GLM47_FLASH, topology(), {}, "fsdp"),
    "qwen3-vl-30b-a3b vision tower over experts": (QWEN3_VL_30B_A3B, topology(gpu_variant="H200"), {}, "fsdp"),
    "qwen3-next-80b full-attention KV alone": (QWEN3_NEXT_80B, topology(gpu_variant="H200"), {}, "fsdp"),
}


def table_of(config: dict[str, Any], topo: Any, sections: dict[str, Any], profile: str) -> dict[str, Any]:
    composed = composed_of(topo, recipe(**sections), profile)
    arch = ModelFacts.from_hf_config(config).architecture
    dev = device(topo.gpu_variant)
    table = memory.estimate(arch, Geometry.from_recipe(composed), composed, dev)
    return _pinned(table)


def _pinned(table: memory.MemoryTable) -> dict[str, Any]:
    pinned = table.as_dict()
    pinned["parts"] = {f"{r.role} {r.phase}": dict(r.parts) for r in table.rows}
    pinned["certain_bytes"] = {f"{r.role} {r.phase}": r.certain for r in table.rows}
    if table.kv is not None:
        kv = table.kv
        pinned["kv_bytes"] = {
            "weights": kv.weights,
            "overhead": kv.overhead,
            "bytes_per_token": kv.bytes_per_token,
            "blocks": kv.blocks,
            "one_sequence": kv.one_sequence,
            "window": kv.window,
            "sliding_layers": kv.sliding_layers,
            "layers": kv.layers,
            "block": kv.block,
        }
    return pinned


def cpu_case() -> dict[str, Any]:
    from rlaunch.runtimes.registry import get_profile
    from rlaunch.skyrl.values.config_yaml import render_recipe
    from tests.support.specs import BASE_RECIPE

    topo, profile = cpu_topology(), get_profile("trl-cpu")
    composed, _ = profile.compose(render_recipe(BASE_RECIPE, topo.role_plan, profile, 17))
    arch = ModelFacts.from_hf_config(LLAMA_31_8B).architecture
    slot = host_slot(64 * GIB, 2)
    return _pinned(memory.estimate(arch, Geometry.from_recipe(composed), composed, slot, cpu=True))


def every_table() -> dict[str, Any]:
    out = {name: table_of(*case) for name, case in CASES.items()}
    out["llama-8b trl-cpu on a slot of 32 GiB"] = cpu_case()
    return out


def test_every_memory_table_is_what_it_was() -> None:
    found = json.loads(json.dumps(every_table()))
    if os.environ.get("RLAUNCH_UPDATE_GOLDEN"):
        GOLDEN.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")
    expected = json.loads(GOLDEN.read_text())
    assert set(found) == set(expected)
    for name in expected:
        assert found[name] == expected[name], name


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_sizes_its_plan(name: str) -> None:
    """Each pinned case is sized (a case that stopped being sized would pin only its reason)."""
    table = table_of(*CASES[name])
    assert table["device"] is not None and table["rows"]
