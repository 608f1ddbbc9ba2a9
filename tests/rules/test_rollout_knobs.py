"""Every rollout setting that moves an engine's memory (issue 41, item 2), and the families and
devices that were not sized before it.

Counted before: `kv_cache_dtype` (test_memory_model.py), `enforce_eager` (the CUDA graphs),
`max_num_seqs` and `max_num_batched_tokens` (the profiling peak), expert and data parallelism (the
experts' shard). Counted here: online quantization and `cpu_offload_gb`. Every config is the model's
published `config.json` (Hugging Face), restated with the keys the memory model reads.
"""

from __future__ import annotations

import pytest

from rlaunch.rules import memory
from rlaunch.rules.devices import GIB, MIB, device
from tests.rules.test_memory_model import FP8_BLOCK, QWEN3_30B_A3B, QWEN3_235B_A22B_FP8, arch, engine, table
from tests.support.specs import recipe

# zai-org/GLM-4.7-Flash config.json (Glm4MoeLiteForCausalLM): DeepSeek-V3's layout at 30B-A3B.
GLM47_FLASH = {
    "model_type": "glm4_moe_lite",
    "vocab_size": 154880,
    "hidden_size": 2048,
    "intermediate_size": 10240,
    "moe_intermediate_size": 1536,
    "num_hidden_layers": 47,
    "num_attention_heads": 20,
    "num_key_value_heads": 20,
    "attention_bias": False,
    "max_position_embeddings": 202752,
    "q_lora_rank": 768,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 192,
    "qk_rope_head_dim": 64,
    "v_head_dim": 256,
    "n_routed_experts": 64,
    "n_shared_experts": 1,
    "num_experts_per_tok": 4,
    "topk_method": "noaux_tc",
    "first_k_dense_replace": 1,
    "num_nextn_predict_layers": 1,
    "tie_word_embeddings": False,
    "dtype": "bfloat16",
}
# Qwen/Qwen3-VL-30B-A3B-Instruct config.json: the language model in `text_config`.
QWEN3_VL_30B_A3B = {
    "model_type": "qwen3_vl_moe",
    "tie_word_embeddings": False,
    "text_config": {
        "model_type": "qwen3_vl_moe_text",
        "attention_bias": False,
        "decoder_sparse_step": 1,
        "head_dim": 128,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "max_position_embeddings": 262144,
        "mlp_only_layers": [],
        "moe_intermediate_size": 768,
        "num_attention_heads": 32,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "num_hidden_layers": 48,
        "num_key_value_heads": 4,
        "vocab_size": 151936,
        "dtype": "bfloat16",
    },
    "vision_config": {
        "deepstack_visual_indexes": [8, 16, 24],
        "depth": 27,
        "hidden_size": 1152,
        "in_channels": 3,
        "intermediate_size": 4304,
        "num_heads": 16,
        "num_position_embeddings": 2304,
        "out_hidden_size": 2048,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    },
}
# Qwen/Qwen3-VL-8B-Instruct config.json: Qwen3-8B's language model, the same vision tower into 4096.
QWEN3_VL_8B = {
    "model_type": "qwen3_vl",
    "tie_word_embeddings": False,
    "text_config": {
        "model_type": "qwen3_vl_text",
        "head_dim": 128,
        "hidden_size": 4096,
        "intermediate_size": 12288,
        "num_attention_heads": 32,
        "num_hidden_layers": 36,
        "num_key_value_heads": 8,
        "vocab_size": 151936,
        "dtype": "bfloat16",
    },
    "vision_config": {**QWEN3_VL_30B_A3B["vision_config"], "out_hidden_size": 4096},
}
# zai-org/GLM-4.5-Air config.json (Glm4MoeForCausalLM): q/k/v biases, no q/k norms, one dense first layer.
GLM45_AIR = {
    "model_type": "glm4_moe",
    "attention_bias": True,
    "head_dim": 128,
    "hidden_size": 4096,
    "intermediate_size": 10944,
    "max_position_embeddings": 131072,
    "moe_intermediate_size": 1408,
    "num_attention_heads": 96,
    "n_routed_experts": 128,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 1,
    "num_hidden_layers": 46,
    "num_key_value_heads": 8,
    "num_nextn_predict_layers": 1,
    "partial_rotary_factor": 0.5,
    "tie_word_embeddings": False,
    "vocab_size": 151552,
    "torch_dtype": "bfloat16",
}
# zai-org/GLM-4.5 config.json: the same layout, wider and deeper, with q/k norms (`use_qk_norm`).
GLM45 = {
    **GLM45_AIR,
    "hidden_size": 5120,
    "intermediate_size": 12288,
    "moe_intermediate_size": 1536,
    "n_routed_experts": 160,
    "num_hidden_layers": 92,
    "first_k_dense_replace": 3,
    "use_qk_norm": True,
}
# MiniMaxAI/MiniMax-M2 config.json: FP8 blocks (the router, its bias and the LM head not converted).
MINIMAX_M2 = {
    "model_type": "minimax_m2",
    "hidden_size": 3072,
    "intermediate_size": 1536,
    "num_hidden_layers": 62,
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 196608,
    "num_local_experts": 256,
    "num_experts_per_tok": 8,
    "scoring_func": "sigmoid",
    "use_routing_bias": True,
    "use_qk_norm": True,
    "qk_norm_type": "per_layer",
    "rotary_dim": 64,
    "vocab_size": 200064,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "torch_dtype": "bfloat16",
    "quantization_config": {**FP8_BLOCK, "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"]},
}
# Qwen/Qwen3-Next-80B-A3B-Instruct config.json: gated delta-net linear attention in 3 layers of 4.
QWEN3_NEXT_80B = {
    "model_type": "qwen3_next",
    "hidden_size": 2048,
    "num_hidden_layers": 48,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "intermediate_size": 5120,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "decoder_sparse_step": 1,
    "mlp_only_layers": [],
    "full_attention_interval": 4,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "linear_value_head_dim": 128,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
    "max_position_embeddings": 262144,
    "torch_dtype": "bfloat16",
}
# the published totals (model cards) of the new families (their small configs' exact counts: built_counts.py)
PUBLISHED = [
    (GLM47_FLASH, 30e9),  # zai-org/GLM-4.7-Flash: "30B-A3B" (without its MTP layer)
    (QWEN3_VL_30B_A3B, 31.1e9),  # Qwen/Qwen3-VL-30B-A3B-Instruct: 31.1B (safetensors)
    (QWEN3_VL_8B, 8.77e9),  # Qwen/Qwen3-VL-8B-Instruct: 8.77B (safetensors)
    (GLM45_AIR, 106e9),  # zai-org/GLM-4.5-Air: 106B total, 12B active
    (GLM45, 355e9),  # zai-org/GLM-4.5: 355B total, 32B active
    (MINIMAX_M2, 230e9),  # MiniMaxAI/MiniMax-M2: 230B total, 10B active
    (QWEN3_NEXT_80B, 80e9),  # Qwen/Qwen3-Next-80B-A3B-Instruct: 80B total
]
QWEN3_30B_BF16 = 2 * 30_532_122_624  # Qwen3-30B-A3B's parameters in bf16 (test_memory_model's counts)


def engine_kwargs(**kwargs: object) -> dict:
    return recipe(generator={"inference_engine": {"engine_init_kwargs": kwargs}})


def weights_row(t: memory.MemoryTable) -> memory.Row:
    (row,) = [r for r in t.rows if r.phase == "engine weights"]
    return row


def test_an_fp8_online_engine_holds_its_linear_weights_in_one_byte() -> None:
    """`engine_init_kwargs.quantization: fp8` on Qwen3-30B-A3B's bf16 checkpoint (the common FP8
    rollout): vLLM quantizes the linear layers as it loads them. One TP1 device holds attention
    905,969,664 + experts 28,991,029,248 at one byte, and embeddings + LM head 2 x 311,164,928, router
    12,582,912 and norms 210,944 at two: 29,896,998,912 + 1,270,247,424 = 31,167,246,336 bytes (29.03
    GiB), not the 61,064,245,248 (56.87 GiB) of bf16."""
    assert engine(QWEN3_30B_A3B).weights == QWEN3_30B_BF16
    fp8 = table(QWEN3_30B_A3B, engine_kwargs(quantization="fp8"))
    row = weights_row(fp8)
    assert (row.estimate, row.certain) == (31_167_246_336, 31_167_246_336)
    assert row.detail == "per TP1 x PP1 shard, fp8 (online), against the utilization budget"
    assert fp8.kv is not None and fp8.kv.weights == 31_167_246_336 and fp8.unsized == ()
    # the weights the engine wakes beside the policy are the fp8 ones too
    (sync,) = [r for r in fp8.rows if r.phase == "weight sync"]
    assert sync.estimate - next(r for r in table(QWEN3_30B_A3B).rows if r.phase == "weight sync").estimate == (
        31_167_246_336 - QWEN3_30B_BF16
    )


@pytest.mark.parametrize(("method", "weights"), [("FP8", 31_167_246_336), ("ptpc_fp8", 31_167_246_336)])
def test_online_fp8_is_read_whatever_its_case(method: str, weights: int) -> None:
    assert engine(QWEN3_30B_A3B, engine_kwargs(quantization=method)).weights == weights


def test_experts_int8_packs_only_the_experts() -> None:
    """experts 28,991,029,248 at one byte, the other 1,541,093,376 parameters at two: 32,073,216,000."""
    assert engine(QWEN3_30B_A3B, engine_kwargs(quantization="experts_int8")).weights == 32_073_216_000


def test_a_quantized_checkpoint_is_loaded_as_packed_whatever_the_setting_names() -> None:
    """Qwen3-235B-A22B-FP8 is block-quantized already: `quantization: fp8` changes nothing, and a
    setting for an unquantized checkpoint's online packing is not applied on top of the checkpoint's."""
    packed = engine(QWEN3_235B_A22B_FP8).weights
    assert engine(QWEN3_235B_A22B_FP8, engine_kwargs(quantization="fp8")).weights == packed
    assert engine(QWEN3_235B_A22B_FP8, engine_kwargs(quantization="experts_int8")).weights == packed
    assert table(QWEN3_235B_A22B_FP8, engine_kwargs(quantization="awq")).unsized == ()


def test_a_quantization_not_sized_online_is_said_and_the_weights_stay_unquantized() -> None:
    found = table(QWEN3_30B_A3B, engine_kwargs(quantization="bitsandbytes"))
    assert found.unsized == (
        "engine_init_kwargs.quantization='bitsandbytes' is not sized (online: fp8, ptpc_fp8, experts_int8): "
        "the engine's weights are sized unquantized, in the model dtype",
    )
    assert weights_row(found).estimate == QWEN3_30B_BF16
    assert "memory: engine_init_kwargs.quantization='bitsandbytes' is not sized" in found.warnings()[0]
    assert table(QWEN3_30B_A3B, engine_kwargs(quantization=None)).unsized == ()


def test_cpu_offload_gb_leaves_that_much_of_the_weights_in_cpu_memory() -> None:
    """`cpu_offload_gb: 8` (GiB per device): 61,064,245,248 - 8 x 2^30 = 52,474,310,656 bytes on the
    GPU; the KV cache gets the 8 GiB back."""
    base, offloaded = engine(QWEN3_30B_A3B), engine(QWEN3_30B_A3B, engine_kwargs(cpu_offload_gb=8))
    assert offloaded.weights == QWEN3_30B_BF16 - 8 * GIB == 52_474_310_656
    assert offloaded.available - base.available == 8 * GIB
    row = weights_row(table(QWEN3_30B_A3B, engine_kwargs(cpu_offload_gb=8)))
    assert row.detail == "per TP1 x PP1 shard, 8 GiB offloaded to the CPU, against the utilization budget"
    # a fraction of a GiB, and more than the weights (nothing is left on the GPU, never less than nothing)
    assert engine(QWEN3_30B_A3B, engine_kwargs(cpu_offload_gb=0.5)).weights == QWEN3_30B_BF16 - GIB // 2
    assert engine(QWEN3_30B_A3B, engine_kwargs(cpu_offload_gb=1000)).weights == 0
    assert engine(QWEN3_30B_A3B, engine_kwargs(cpu_offload_gb=0)).weights == QWEN3_30B_BF16


def test_an_offloaded_fp8_engine_says_both() -> None:
    both = table(QWEN3_30B_A3B, engine_kwargs(quantization="fp8", cpu_offload_gb=4))
    assert weights_row(both).estimate == 31_167_246_336 - 4 * GIB
    assert ", fp8 (online), 4 GiB offloaded to the CPU," in weights_row(both).detail


def test_a_glm_47_flash_plan_is_sized() -> None:
    """GLM-4.7-Flash (`glm4_moe_lite`) is DeepSeek-V3's layout. A layer's attention: q through its
    768-rank LoRA (2048 x 768 + 768 + 768 x 20 x 256 = 5,505,792), the KV latent (2048 x 576 =
    1,179,648, its norm 512, up-projection 512 x 20 x 448 = 4,587,520) and o (20 x 256 x 2048 =
    10,485,760): 21,759,232, x 47 = 1,022,683,904. Experts: 46 MoE layers (the first is dense) x 64
    x 3 x 2048 x 1536 = 27,783,069,696; 29,943,393,920 in all (the 30B of its name, without the MTP
    layer transformers does not build). The KV cache holds one 576-value latent a layer: 47 x 576 x 2
    = 54,144 bytes a token, in 64-token pages on an H100 (FlashMLA)."""
    a = arch(GLM47_FLASH)
    assert a.params.attention == 1_022_683_904 and a.params.experts == 27_783_069_696
    assert a.params.total == 29_943_393_920 and (a.moe_layers, a.kv_latent) == (46, 576)
    t = table(GLM47_FLASH)
    assert t.kv is not None and (t.kv.bytes_per_token, t.kv.block) == (54_144, 64)
    assert weights_row(t).estimate == 2 * 29_943_393_920
    assert {(r.role, r.phase) for r in t.rows} >= {("policy", "model states"), ("rollout", "KV of one sequence")}
    assert t.unsized == ()


def test_a_qwen3_vl_moe_engine_is_sized() -> None:
    """Qwen3-VL-30B-A3B: the language model of Qwen3-30B-A3B read from `text_config` (30,532,122,624)
    and a vision tower of 538,631,408: patch embedding 3 x 2 x 16^2 x 1152 + 1152 = 1,770,624, learned
    positions 2304 x 1152 = 2,654,208, 27 blocks of 15,239,504 (LayerNorms 4 x 1152, qkv and proj
    4 x 1152^2 + 4 x 1152, MLP 2 x 1152 x 4304 + 4304 + 1152) = 411,466,608, the merger's norm 2304
    and merger 4608^2 + 4608 + 4608 x 2048 + 2048 = 30,677,504, and three deepstack mergers of
    30,686,720 (their norms over the merged 4608) = 92,060,160: 31,070,754,032 (the 31.1B published).
    One TP1 engine device holds them in bf16: 62,141,508,064 bytes; K and V of 48 layers x 4 heads of
    128: 98,304 bytes a token."""
    a = arch(QWEN3_VL_30B_A3B)
    assert a.params.vision == 538_631_408 and a.params.total == 31_070_754_032
    assert a.params.total - a.params.vision == arch(QWEN3_30B_A3B).params.total
    e = engine(QWEN3_VL_30B_A3B)
    assert (e.weights, e.bytes_per_token) == (62_141_508_064, 98_304)
    assert weights_row(table(QWEN3_VL_30B_A3B)).estimate == 62_141_508_064


def test_a_vl_config_reads_its_tied_embeddings_at_the_top_before_its_text_config() -> None:
    untied = arch(QWEN3_VL_30B_A3B)
    tied_text = {**QWEN3_VL_30B_A3B, "text_config": {**QWEN3_VL_30B_A3B["text_config"], "tie_word_embeddings": True}}
    assert arch(tied_text).params.lm_head == untied.params.lm_head  # the top level says False
    top_absent = {k: v for k, v in tied_text.items() if k != "tie_word_embeddings"}
    assert arch(top_absent).params.lm_head == 0
    dense = {**top_absent, "model_type": "qwen3_vl"}
    assert arch(dense).params.lm_head == 0 and arch(dense).params.experts == 0


@pytest.mark.parametrize(
    ("variant", "mib"),
    [("RTX 4060", 8188), ("RTX 4060 Ti", 8188), ("RTX4060Ti-8GB", 8188), ("RTX 4060 Ti 16GB", 16376),
     ("RTX 4070", 12282), ("RTX 4070 Super", 12282), ("RTX 4070 Ti", 12282), ("RTX 4070 Ti Super", 16376),
     ("RTX 4080", 16376), ("RTX 4080 Super", 16376)],
)  # fmt: skip
def test_the_ada_consumer_cards_are_known_with_their_memory(variant: str, mib: int) -> None:
    found = device(variant)
    assert found is not None and found.bytes == mib * MIB and found.sm == 89


@pytest.mark.parametrize(
    ("config", "total"),
    PUBLISHED,
    ids=["glm-4.7-flash", "qwen3-vl-30b-a3b", "qwen3-vl-8b", "glm-4.5-air", "glm-4.5", "minimax-m2", "qwen3-next-80b"],
)
def test_the_new_families_match_their_published_totals(config: dict, total: float) -> None:
    assert abs(arch(config).params.total - total) <= 0.02 * total


def test_glm_45_biases_q_k_and_v_but_not_o() -> None:
    """GLM-4.5-Air (`glm4_moe`): a layer's attention is q 4096 x 12288, k and v 2 x 4096 x 1024, o
    12288 x 4096 and the q/k/v biases 12288 + 2048 (o has none): 109,066,240, x 46 = 5,017,047,040;
    its 45 MoE layers' routers 128 x 4096: 23,592,960 (the correction bias is a buffer transformers
    does not count). Active without the embeddings: 13.42B - 2 x 0.62B = 12.2B (12B)."""
    air = arch(GLM45_AIR)
    assert air.params.attention == 5_017_047_040 and air.params.router == 23_592_960
    assert not air.qk_norm and abs(air.active_params - 2 * air.params.embeddings - 12e9) <= 0.03 * 12e9
    normed = arch(GLM45)
    assert normed.qk_norm and normed.params.norms == 92 * (2 * 5120 + 2 * 128) + 5120
    assert arch({**GLM45_AIR, "attention_bias": False}).params.attention == 5_017_047_040 - 46 * 14_336
    # the q/k norms save their inputs for backward too: the training step grows with them
    step = [r.estimate for t in (table(GLM45_AIR), table({**GLM45_AIR, "use_qk_norm": True})) for r in t.rows
            if r.phase == "training bar"]  # fmt: skip
    assert step[1] > step[0]


def test_minimax_m2_norms_q_and_k_over_every_head_and_is_loaded_as_its_fp8_blocks() -> None:
    """MiniMax-M2 (`minimax_m2`): per layer two RMSNorms of 3072 and q/k norms over 48 + 8 heads of 128
    (7,168, not one head's 256): 62 x 13,312 + 3,072 = 828,416; routers 62 x 256 x 3072 = 48,758,784
    (the routing bias is a buffer); 228.69B in all, 9.80B active without the embeddings (230B-A10B).
    An engine loads attention and experts in FP8 blocks (1 + 4 / 128^2 bytes a weight), the rest in bf16."""
    a = arch(MINIMAX_M2)
    assert a.params.norms == 828_416 and a.params.router == 48_758_784 and a.qk_norm
    assert abs(a.active_params - 2 * a.params.embeddings - 10e9) <= 0.03 * 10e9
    per_weight = 1 + 4 / 128**2
    rest = 2 * (2 * a.params.embeddings + a.params.router + a.params.norms)
    expected = int(a.params.attention * per_weight + rest) + int(a.params.experts * per_weight)
    assert abs(engine(MINIMAX_M2, variant="H200").weights - expected) <= 1


def test_qwen3_next_holds_kv_in_its_full_attention_layers_alone() -> None:
    """Qwen3-Next-80B-A3B (`qwen3_next`): 12 of 48 layers attend in full (every fourth), with q_proj
    also yielding the output gate: 2048 x 8192 + k and v 2 x 2048 x 512 + o 4096 x 2048 = 27,262,976;
    the 36 linear-attention layers hold q/k/v/z 2048 x 12,288, the b/a gates 2048 x 64, a depthwise
    convolution 8192 x 4, dt_bias and A_log 64 and out 4096 x 2048: 33,718,336. Attention in all:
    12 x 27,262,976 + 36 x 33,718,336 = 1,541,015,808. K and V only in the 12: 2 x 12 x 2 heads x 256
    x 2 bytes = 24,576 bytes a token (48 layers would be 98,304). A sequence's linear-attention state
    (36 x (8192 x 3 + 32 x 128 x 128) = 19,759,104 values, 0.04 GiB in bf16) is said, not sized."""
    a = arch(QWEN3_NEXT_80B)
    assert a.params.attention == 1_541_015_808 and (a.linear_layers, a.attention_layers) == (36, 12)
    assert a.linear_state == 19_759_104
    t = table(QWEN3_NEXT_80B)
    assert t.kv is not None and t.kv.bytes_per_token == 24_576 and t.kv.layers == 12
    assert t.unsized == (
        "the 36 linear-attention layers' state, 0.04 GiB a sequence in vLLM's KV pool, is not sized: "
        "the KV cache counts the full-attention layers alone",
    )
    typed = {**QWEN3_NEXT_80B, "layer_types": ["linear_attention"] * 40 + ["full_attention"] * 8}
    assert (arch(typed).linear_layers, engine(typed).bytes_per_token) == (40, 2 * 8 * 2 * 256 * 2)
