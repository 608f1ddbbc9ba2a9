"""The model side of memory fit: review findings of issue 30, what is rolled out (quantized
checkpoints, MLA, sliding windows, shared experts, vision towers), and vLLM's own start-up numbers.

Every config below is the published `config.json` of the model named beside it (Hugging Face model
cards), restated with the keys the memory model reads; every start-up number cites its issue.
"""

from __future__ import annotations

import pytest

from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules import memory
from rlaunch.rules.architecture import Architecture
from rlaunch.rules.devices import GIB, device
from rlaunch.skyrl import ModelFacts
from tests.rules.test_memory import composed_of
from tests.skyrl.helpers import recipe, topology

# Qwen/Qwen3-30B-A3B config.json: every layer MoE (decoder_sparse_step 1, no mlp_only_layers), yet the
# config also states the dense intermediate_size 6144 that no layer uses.
QWEN3_30B_A3B = {
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
# Qwen/Qwen3-235B-A22B-FP8 config.json: block-quantized FP8 (128 x 128 blocks, fp32 scales).
FP8_BLOCK = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
QWEN3_235B_A22B_FP8 = {
    **QWEN3_30B_A3B,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "moe_intermediate_size": 1536,
    "num_hidden_layers": 94,
    "num_attention_heads": 64,
    "quantization_config": FP8_BLOCK,
}


def arch(config: dict) -> Architecture:
    found = ModelFacts.from_hf_config(config).architecture
    assert isinstance(found, Architecture), found
    return found


def table(config: dict, tree: dict | None = None, variant: str = "H100") -> memory.MemoryTable:
    topo = topology(gpu_variant=variant)
    composed = composed_of(topo, tree or recipe())
    return memory.estimate(arch(config), Geometry.from_recipe(composed), composed, device(variant))


def engine(config: dict, tree: dict | None = None, variant: str = "H100") -> memory.KvCapacity:
    topo = topology(gpu_variant=variant)
    composed = composed_of(topo, tree or recipe())
    return memory.engine_kv(arch(config), Geometry.from_recipe(composed), composed, device(variant))


# --- review findings (each failed before its fix) ------------------------------------------------


def test_a_moe_configs_unused_dense_intermediate_size_changes_no_row() -> None:
    """Finding: Qwen3-MoE kept the dense `intermediate_size` for its MLP activations (and the engine's
    profiling estimate), 8x too large for Qwen3-30B-A3B. With every layer MoE, no row may read it."""
    stated = table(QWEN3_30B_A3B)
    widened = table({**QWEN3_30B_A3B, "intermediate_size": 99_999})
    assert [r.estimate for r in stated.rows] == [r.estimate for r in widened.rows]
    assert stated.kv is not None and widened.kv is not None and stated.kv.overhead == widened.kv.overhead


def test_moe_activations_follow_the_experts_a_token_passes_through() -> None:
    """A token passes through `num_experts_per_tok` experts of `moe_intermediate_size`: halving the
    experts per token leaves the model states and lowers the step (its activations) and the engine's
    profiling estimate."""

    def step(config: dict) -> tuple[int, int, int]:
        t = table(config)
        rows = {r.phase: r.estimate for r in t.rows if r.role in ("policy", "colocated")}
        assert t.kv is not None
        return rows["model states"], rows["training bar"], t.kv.overhead

    states, bar, overhead = step(QWEN3_30B_A3B)
    fewer = step({**QWEN3_30B_A3B, "num_experts_per_tok": 4})
    assert fewer[0] == states and fewer[1] < bar and fewer[2] < overhead


def test_kv_of_a_quantized_checkpoint_stays_in_the_activation_dtype_unless_set() -> None:
    """Finding: vLLM keeps the KV cache in the model (activation) dtype for `kv_cache_dtype: auto`,
    whatever the weights are packed in; fp8* halves it. vllm-project/vllm#21348 ran Qwen3-235B-A22B-FP8
    at TP4 with a bf16 KV cache (8.11 GiB held 178,880 tokens: 48 KiB a token per device)."""
    auto = engine(QWEN3_235B_A22B_FP8)
    assert auto.bytes_per_token == 2 * 94 * 4 * 128 * 2  # K and V, 94 layers, 4 KV heads of 128, bf16
    at_tp4 = memory.kv_bytes_per_token(arch(QWEN3_235B_A22B_FP8), tp=4, dtype_bytes=2)
    assert abs(memory.kv_tokens(int(8.11 * GIB), at_tp4) - 178_880) <= 0.02 * 178_880
    fp8 = recipe(generator={"inference_engine": {"engine_init_kwargs": {"kv_cache_dtype": "fp8_e4m3"}}})
    assert engine(QWEN3_235B_A22B_FP8, fp8).bytes_per_token == engine(QWEN3_235B_A22B_FP8).bytes_per_token // 2
    # the weights are the checkpoint's: ~1 byte a parameter, not model_dtype's 2
    per_param = engine(QWEN3_235B_A22B_FP8).weights / arch(QWEN3_235B_A22B_FP8).params.total
    assert 1.0 < per_param < 1.05


def test_the_exact_engine_weights_row_has_no_tight_margin() -> None:
    """Finding: the engine-weights row is exact (vLLM loads what the checkpoint holds), so the 10 %
    margin meant for estimates must not mark 95 % of the budget tight; the KV row says what is left."""
    geo = Geometry.from_recipe(composed_of(topology(), recipe()))
    kv = memory.KvCapacity(device=100 * GIB, budget=90 * GIB, weights=int(85.5 * GIB), overhead=GIB,
                           bytes_per_token=1024, max_model_len=1024)  # fmt: skip
    (weights,) = [r for r in memory.rollout_rows(kv, geo) if r.phase == "engine weights"]
    assert weights.status == "ok"
    over = memory.KvCapacity(device=100 * GIB, budget=90 * GIB, weights=91 * GIB, overhead=GIB,
                             bytes_per_token=1024, max_model_len=1024)  # fmt: skip
    assert [r.status for r in memory.rollout_rows(over, geo) if r.phase == "engine weights"] == ["REFUSED"]
