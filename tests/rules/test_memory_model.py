"""The model side of memory fit: review findings of issue 30, what is rolled out (quantized
checkpoints, MLA, sliding windows, shared experts, vision towers), and vLLM's own start-up numbers.

Every config below is the published `config.json` of the model named beside it (Hugging Face model
cards), restated with the keys the memory model reads; every start-up number cites its issue.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules import memory
from rlaunch.rules.devices import GIB, device
from tests.rules.test_memory import arch, composed_of
from tests.support.specs import recipe, topology

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
    profiling forward."""

    # every layer's saved activations (no checkpointing) over long sequences decide the step
    long = recipe(
        trainer={"gradient_checkpointing": False}, generator={"sampling_params": {"max_generate_length": 16384}}
    )

    def step(config: dict) -> tuple[int, int, int]:
        t = table(config, long)
        rows = {r.phase: r.estimate for r in t.rows if r.role in ("policy", "colocated")}
        assert t.kv is not None
        return rows["model states"], rows["training bar"], t.kv.overhead

    states, bar, overhead = step(QWEN3_30B_A3B)
    fewer = step({**QWEN3_30B_A3B, "num_experts_per_tok": 4})
    assert fewer[0] == states and fewer[1] < bar and fewer[2] <= overhead
    forward = [
        memory.profile_peak(arch(c), 1, 16384, 1) for c in (QWEN3_30B_A3B, {**QWEN3_30B_A3B, "num_experts_per_tok": 4})
    ]
    assert forward[1] < forward[0]


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


# --- what is rolled out: published configs against published totals ------------------------------

# deepseek-ai/DeepSeek-V3 config.json (MTP layer num_nextn_predict_layers=1 not counted: 671B is without it)
DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "vocab_size": 129280,
    "max_position_embeddings": 163840,
    "tie_word_embeddings": False,
    "topk_method": "noaux_tc",
    "torch_dtype": "bfloat16",
    "num_nextn_predict_layers": 1,
    "quantization_config": {
        "activation_scheme": "dynamic",
        "fmt": "e4m3",
        "quant_method": "fp8",
        "weight_block_size": [128, 128],
    },
}
# moonshotai/Kimi-K2-Instruct config.json: DeepSeek-V3's layout, 384 experts, 64 heads, one dense layer
KIMI_K2 = {
    **DEEPSEEK_V3,
    "model_type": "kimi_k2",
    "n_routed_experts": 384,
    "first_k_dense_replace": 1,
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "vocab_size": 163840,
    "max_position_embeddings": 131072,
}
# openai/gpt-oss-120b config.json: MXFP4 experts, attention sinks, sliding (128) and full layers alternating
GPT_OSS_120B = {
    "model_type": "gpt_oss",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_hidden_layers": 36,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_local_experts": 128,
    "num_experts_per_tok": 4,
    "experts_per_token": 4,
    "vocab_size": 201088,
    "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 18,
    "attention_bias": True,
    "tie_word_embeddings": False,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
    "quantization_config": {
        "quant_method": "mxfp4",
        "modules_to_not_convert": [
            "model.layers.*.self_attn",
            "model.layers.*.mlp.router",
            "model.embed_tokens",
            "lm_head",
        ],
    },
}
# openai/gpt-oss-20b config.json
GPT_OSS_20B = {
    **GPT_OSS_120B,
    "num_hidden_layers": 24,
    "num_local_experts": 32,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
}
# Qwen/Qwen1.5-MoE-A2.7B config.json (qwen2_moe): 60 routed experts and one shared expert per layer
QWEN15_MOE_A27B = {
    "model_type": "qwen2_moe",
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632,
    "num_experts": 60,
    "num_experts_per_tok": 4,
    "decoder_sparse_step": 1,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "num_key_value_heads": 16,
    "vocab_size": 151936,
    "max_position_embeddings": 8192,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
# google/gemma-2-9b config.json: sliding (4096) and global layers alternating
GEMMA2_9B = {
    "model_type": "gemma2",
    "hidden_size": 3584,
    "intermediate_size": 14336,
    "num_hidden_layers": 42,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "vocab_size": 256000,
    "sliding_window": 4096,
    "max_position_embeddings": 8192,
    "torch_dtype": "float32",
}
# google/gemma-3-1b-it config.json: five sliding (512) layers to one global
GEMMA3_1B = {
    "model_type": "gemma3_text",
    "hidden_size": 1152,
    "intermediate_size": 6912,
    "num_hidden_layers": 26,
    "num_attention_heads": 4,
    "num_key_value_heads": 1,
    "head_dim": 256,
    "vocab_size": 262144,
    "sliding_window": 512,
    "sliding_window_pattern": 6,
    "max_position_embeddings": 32768,
    "torch_dtype": "bfloat16",
}
# Qwen/Qwen2.5-VL-7B-Instruct config.json: the Qwen2 language model and a 32-block vision tower
QWEN25_VL_7B = {
    "model_type": "qwen2_5_vl",
    "hidden_size": 3584,
    "intermediate_size": 18944,
    "num_hidden_layers": 28,
    "num_attention_heads": 28,
    "num_key_value_heads": 4,
    "vocab_size": 152064,
    "max_position_embeddings": 128000,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vision_config": {
        "depth": 32,
        "hidden_size": 1280,
        "intermediate_size": 3420,
        "num_heads": 16,
        "in_chans": 3,
        "out_hidden_size": 3584,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": 112,
        "fullatt_block_indexes": [7, 15, 23, 31],
    },
}
# Qwen/Qwen2.5-VL-72B-Instruct config.json
QWEN25_VL_72B = {
    **QWEN25_VL_7B,
    "hidden_size": 8192,
    "intermediate_size": 29568,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "vocab_size": 152064,
    "vision_config": {**QWEN25_VL_7B["vision_config"], "out_hidden_size": 8192},
}


# fmt: off
# deepseek-ai/DeepSeek-V2-Lite config.json: MLA without a q LoRA, 64 routed and 2 shared experts
DEEPSEEK_V2_LITE = {
    "model_type": "deepseek_v2", "hidden_size": 2048, "intermediate_size": 10944, "moe_intermediate_size": 1408,
    "n_routed_experts": 64, "n_shared_experts": 2, "num_experts_per_tok": 6, "first_k_dense_replace": 1,
    "moe_layer_freq": 1, "num_hidden_layers": 27, "num_attention_heads": 16, "num_key_value_heads": 16,
    "q_lora_rank": None, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "vocab_size": 102400, "topk_method": "greedy", "tie_word_embeddings": False,
}
# Qwen/Qwen2-VL-7B-Instruct config.json
QWEN2_VL_7B = {
    **QWEN25_VL_7B, "model_type": "qwen2_vl",
    "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "in_chans": 3,
                      "hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2},
}
# (config, published total, published active or None): every family not built by transformers in
# tests/runtimes/test_architecture_counts.py is held to its model card here
PUBLISHED_TOTALS = [
        # deepseek-ai/DeepSeek-V3 model card: 671B total, 37B activated per token (without the MTP module)
        (DEEPSEEK_V3, 671e9, 37e9),
        # moonshotai/Kimi-K2-Instruct model card: 1T total (1.03T listed), 32B activated
        (KIMI_K2, 1.03e12, 32e9),
        # openai/gpt-oss-120b model card: 116.83B total (active 5.13B excludes the 0.58B embedding)
        (GPT_OSS_120B, 116.83e9, 5.13e9 + 201088 * 2880),
        # openai/gpt-oss-20b model card: 20.91B total, 3.61B active without the embedding
        (GPT_OSS_20B, 20.91e9, 3.61e9 + 201088 * 2880),
        # Qwen/Qwen3-30B-A3B model card: 30.5B total, 3.3B activated
        (QWEN3_30B_A3B, 30.5e9, 3.3e9),
        # Qwen/Qwen1.5-MoE-A2.7B model card: 14.3B total, 2.7B activated (one shared expert always on)
        (QWEN15_MOE_A27B, 14.3e9, 2.7e9),
        # google/gemma-2-9b: 9.24B; google/gemma-3-1b-it: 999,885,952 (safetensors metadata)
        (GEMMA2_9B, 9.24e9, None),
        (GEMMA3_1B, 999_885_952, None),
        # Qwen/Qwen2.5-VL-7B-Instruct: 8.29B; Qwen2.5-VL-72B-Instruct: 73.4B (vision tower included)
        (QWEN25_VL_7B, 8.29e9, None),
        (QWEN25_VL_72B, 73.4e9, None),
        # deepseek-ai/DeepSeek-V2-Lite: 15.7B total, 2.4B active without the 0.21B embedding
        (DEEPSEEK_V2_LITE, 15.7e9, 2.4e9 + 102400 * 2048),
        # Qwen/Qwen2-VL-7B-Instruct: 8.29B (vision tower of fc1/fc2 blocks, embed_dim 1280)
        (QWEN2_VL_7B, 8.29e9, None),
]
# fmt: on
PUBLISHED_IDS = [
    "deepseek-v3",
    "kimi-k2",
    "gpt-oss-120b",
    "gpt-oss-20b",
    "qwen3-30b-a3b",
    "qwen1.5-moe-a2.7b",
    "gemma-2-9b",
    "gemma-3-1b",
    "qwen2.5-vl-7b",
    "qwen2.5-vl-72b",
    "deepseek-v2-lite",
    "qwen2-vl-7b",
]


@pytest.mark.parametrize(("config", "total", "active"), PUBLISHED_TOTALS, ids=PUBLISHED_IDS)
def test_parameter_counts_match_the_published_totals(config: dict, total: float, active) -> None:
    a = arch(config)
    assert abs(a.params.total - total) <= 0.02 * total, a.params.total
    if active is not None:
        assert abs(a.active_params - active) <= 0.03 * active, a.active_params


def test_multi_head_latent_attention_caches_one_latent_per_token_and_layer() -> None:
    """DeepSeek-V3 caches kv_lora_rank + qk_rope_head_dim = 576 values a layer (not 128 heads of K
    and V), and vLLM keeps the whole latent on every TP rank."""
    a = arch(DEEPSEEK_V3)
    assert memory.kv_bytes_per_token(a) == 61 * 576 * 2
    assert memory.kv_bytes_per_token(a, tp=8) == memory.kv_bytes_per_token(a, tp=1) == 61 * 576 * 2
    assert memory.kv_bytes_per_token(a, tp=8, pp=2) == 31 * 576 * 2


def test_shared_experts_and_dense_first_layers_are_counted() -> None:
    """DeepSeek-V3: layers 0-2 dense (first_k_dense_replace), 58 MoE layers each with one shared
    expert a token always passes through; Qwen1.5-MoE: a shared expert of 5632 beside 4 of 60 routed."""
    ds = arch(DEEPSEEK_V3)
    assert (ds.moe_layers, ds.intermediate, ds.shared_intermediate) == (58, 18432, 2048)
    assert ds.mlp_width == 18432  # a dense layer is wider than 8 x 2048 + 2048
    qwen = arch(QWEN15_MOE_A27B)
    assert qwen.mlp_width == 4 * 1408 + 5632
    no_shared = arch({**QWEN15_MOE_A27B, "shared_expert_intermediate_size": 0})
    # the shared expert's gate stays: transformers builds it whatever the shared expert's width
    assert qwen.params.total - no_shared.params.total == 24 * 3 * 2048 * 5632
    assert qwen.params.router == no_shared.params.router == 24 * (60 * 2048 + 2048)


def test_sliding_layers_follow_the_config() -> None:
    assert arch(GPT_OSS_120B).sliding_layers == 18 and arch(GPT_OSS_120B).sliding_window == 128
    assert arch(GEMMA2_9B).sliding_layers == 21
    assert arch(GEMMA3_1B).sliding_layers == 26 - 4  # every sixth layer attends in full
    assert arch(QWEN25_VL_7B).sliding_layers == 0 and arch(QWEN25_VL_7B).sliding_window is None


def test_a_vision_language_models_training_row_says_its_images_are_not_sized() -> None:
    """The vision tower's weights are in the states; what the images cost in activations is not in the
    recipe, so the row says it is left out rather than pass for the whole step."""
    said = "the vision tower's weights are counted, its activations on the images are not"
    vl = {r.phase: r.detail for r in table(QWEN25_VL_7B).rows if r.role in ("policy", "colocated")}
    text_only = {r.phase: r.detail for r in table(QWEN3_30B_A3B).rows if r.role in ("policy", "colocated")}
    assert said in vl["training bar"]
    assert not any(said in detail for detail in text_only.values())


@pytest.mark.parametrize(
    ("layers", "sliding", "groups"),
    [
        (32, 0, (32, 1, 0)),  # Llama: one group of every layer
        (36, 18, (18, 1, 1)),  # gpt-oss: 18 full and 18 sliding layers
        (62, 52, (10, 1, 6)),  # Gemma-3-27B: 10 global layers, 52 sliding in 6 groups of 10 (8 padding)
        (42, 21, (21, 1, 1)),  # Gemma 2
        (17, 9, (9, 1, 1)),  # 8 full and 9 sliding: within 25 %, so groups of the larger count
        (18, 10, (8, 1, 2)),  # 8 full and 10 sliding: exactly 25 % more is not within it
        (25, 15, (10, 1, 2)),  # 10 and 15: groups of the smaller
        (1, 0, (1, 1, 0)),
        (1, 1, (1, 0, 1)),  # every layer slides: one group
        (0, 0, (1, 0, 0)),
    ],
)
def test_hybrid_kv_groups_follow_vllms_grouping(layers: int, sliding: int, groups: tuple) -> None:
    g = memory.kv_groups(layers, sliding)
    assert (g.size, g.full, g.sliding) == groups


def test_softcapped_logits_keep_one_more_vocabulary_wide_tensor() -> None:
    """Gemma 2 caps its logits out of place (tanh(logits / cap) * cap), by default when the config
    omits the cap: the training row's logits hold three bf16 [tokens x vocab] tensors instead of two,
    the reference's two instead of one (tests/runtimes/test_memtracker.py measures both)."""
    uncapped = {**GEMMA2_9B, "final_logit_softcapping": None}
    for config in (GEMMA2_9B, {**GEMMA2_9B, "final_logit_softcapping": 30.0}):
        capped, plain = table(config), table(uncapped)
        train = [r for r in capped.rows if r.phase == "training bar"][0]
        train_plain = [r for r in plain.rows if r.phase == "training bar"][0]
        assert train.part("logits") * 2 == train_plain.part("logits") * 3
        ref = [r for r in capped.rows if r.role == "reference"][0]
        ref_plain = [r for r in plain.rows if r.role == "reference"][0]
        assert ref.part("logits") == 2 * ref_plain.part("logits")
    assert not arch({**GEMMA3_1B}).logit_softcapping  # Gemma 3 has no cap by default


def test_a_sliding_layers_kv_is_bounded_by_its_window_and_the_prefill_chunk() -> None:
    """vLLM V1 holds at most window - 1 + max_num_batched_tokens tokens (+1 block) for a sliding layer:
    gpt-oss-120b's concurrency at 131,072 tokens is nearly twice a model with every layer in full."""
    a = arch(GPT_OSS_120B)
    hybrid = memory.KvCapacity(device=80 * GIB, budget=72 * GIB, weights=0, overhead=0, max_model_len=131072,
                               bytes_per_token=memory.kv_bytes_per_token(a), window=128, sliding_layers=18,
                               layers=36, batched_tokens=8192)  # fmt: skip
    full = memory.KvCapacity(device=80 * GIB, budget=72 * GIB, weights=0, overhead=0, max_model_len=131072,
                             bytes_per_token=memory.kv_bytes_per_token(a), layers=36)  # fmt: skip
    assert hybrid.tokens == full.tokens  # the reported size counts every layer
    per_seq = 131072 // 16 + (-(-(128 - 1 + 8192) // 16) + 1)  # full group + sliding group
    assert hybrid.blocks_per_sequence == per_seq
    assert 1.85 < hybrid.sequences / full.sequences < 2.0
    assert hybrid.one_sequence < 0.54 * full.one_sequence


# compressed-tensors W8A8, per-channel int8 (neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8)
W8A8_CHANNEL = {
    "quant_method": "compressed-tensors",
    "ignore": ["lm_head"],
    "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel"}}
    },
}
# compressed-tensors FP8 dynamic, per-channel (RedHatAI/Meta-Llama-3.1-8B-Instruct-FP8-dynamic)
FP8_CHANNEL = {
    "quant_method": "compressed-tensors",
    "ignore": ["lm_head"],
    "config_groups": {
        "group_0": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}
    },
}
# Qwen/Qwen2.5-7B-Instruct-AWQ and -GPTQ-Int4: 4-bit, groups of 128
AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}
GPTQ = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}


@pytest.mark.parametrize(
    ("quantization", "per_weight"),
    [
        (FP8_BLOCK, 1 + 4 / (128 * 128)),  # fp8 values, an fp32 scale per 128 x 128 block
        ({"quant_method": "fp8", "activation_scheme": "static"}, 1),  # per-tensor scale
        (FP8_CHANNEL, 1),  # one scale per output channel: negligible
        (W8A8_CHANNEL, 1),
        (AWQ, 0.5 + (2 + 0.5) / 128),  # int4 packed, an fp16 scale and a packed 4-bit zero per group
        (GPTQ, 0.5 + (2 + 0.5) / 128),
    ],
    ids=["fp8-block", "fp8-tensor", "ct-fp8-channel", "ct-int8-channel", "awq", "gptq"],
)
def test_packed_linear_weights_take_the_schemes_bytes_and_the_rest_the_model_dtype(quantization, per_weight) -> None:
    from tests.support.specs import LLAMA_31_8B

    a = arch({**LLAMA_31_8B, "quantization_config": quantization})
    p = a.params
    dense, experts = a.stored_bytes(2)
    assert experts == 0
    expected = (p.attention + p.mlp) * per_weight + 2 * (p.embeddings + p.lm_head + p.norms)
    assert dense == pytest.approx(expected, rel=1e-6)


def test_mxfp4_packs_only_the_experts() -> None:
    a = arch(GPT_OSS_120B)
    dense, experts = a.stored_bytes(2)
    assert dense == 2 * (a.params.total - a.params.experts)
    assert experts == pytest.approx(a.params.experts * 4.25 / 8 * 3072 / 2880, rel=1e-6)  # hidden padded to 256


def test_an_unknown_quantization_is_said_not_guessed() -> None:
    from rlaunch.rules.model_shape import Unsized, from_hf_config

    found = from_hf_config({**QWEN3_30B_A3B, "quantization_config": {"quant_method": "hqq"}})
    assert isinstance(found, Unsized) and "'hqq'" in found.reason


def test_training_a_quantized_checkpoint_is_sized_as_its_parameters() -> None:
    """Decision: the trainer holds its own fp32 master weights, gradients and Adam moments whatever the
    checkpoint's packing, so the training rows follow the parameter count (only the engine's weights
    follow the packing)."""
    plain, packed = table(QWEN3_30B_A3B), table({**QWEN3_30B_A3B, "quantization_config": FP8_BLOCK})
    engine = lambda r: r.role == "rollout" or r.phase == "weight sync"  # noqa: E731  (the engine's weights woken)
    rows = lambda t: {(r.role, r.phase): r.estimate for r in t.rows if not engine(r)}  # noqa: E731
    assert rows(plain) == rows(packed)
    assert packed.kv is not None and plain.kv is not None and packed.kv.weights < 0.6 * plain.kv.weights


# --- the engine side: vLLM's published start-up numbers (within 5 %) ------------------------------

# Qwen/Qwen3-30B-A3B-FP8 and Qwen3-Coder-30B-A3B-Instruct-FP8: the Qwen3-30B-A3B layout, FP8 blocks
QWEN3_30B_A3B_FP8 = {**QWEN3_30B_A3B, "quantization_config": FP8_BLOCK}


def close(ours: float, theirs: float, rel: float = 0.05) -> bool:
    return abs(ours - theirs) <= rel * theirs


# Qwen/Qwen2-7B-Instruct config.json (its sliding_window is off: use_sliding_window false)
QWEN2_7B = {
    "model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
    "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "max_position_embeddings": 32768,
    "sliding_window": 131072, "use_sliding_window": False, "max_window_layers": 28, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}  # fmt: skip
DENNISLEE = "https://github.com/dennislee22/vLLM-benchmarking/blob/main/log/"
# google/gemma-3-27b-it config.json, its text_config (the KV cache is the language model's): 10 global layers
# (every sixth) and 52 sliding (1024)
GEMMA3_27B = {
    "model_type": "gemma3_text", "hidden_size": 5376, "intermediate_size": 21504, "num_hidden_layers": 62,
    "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128, "sliding_window": 1024,
    "sliding_window_pattern": 6, "vocab_size": 262208, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
}  # fmt: skip


@dataclass(frozen=True)
class StartUp:
    """One published vLLM start-up log: the inputs it states and the KV numbers vLLM derived."""

    source: str  # where it was published
    vllm: str  # the vLLM version the log names (V0 / V1 where it names only the engine)
    model: str  # a `_model` name
    available_gib: float  # "Available KV cache memory" / "kv_cache_size" (of the stage with the most layers)
    max_model_len: int
    tokens: int  # "GPU KV cache size: N tokens" (V0: "# GPU blocks" x 16)
    concurrency: float | None = None  # "Maximum concurrency for max_model_len tokens per request"
    blocks: int | None = None  # "# GPU blocks" / num_gpu_blocks, where logged
    tp: int = 1
    pp: int = 1
    kv_bytes: int = 2  # KV dtype: auto is the activation dtype (2), fp8 is 1
    batched: int = 8192  # max_num_batched_tokens (a sliding layer's KV holds a prefill chunk)
    gpu: str = "H100"  # decides the block size (MLA on Hopper: 64); one not in the device table pages 16 tokens


KV_CASES = [
    # V0 (0.6.x), Llama-3.1-8B-Instruct on an RTX 3090, --max-model-len 20000: "kv_cache_size=3.81GiB",
    # "# GPU blocks: 1952", "Maximum concurrency for 20000 tokens per request: 1.56x"
    StartUp("https://github.com/vllm-project/vllm/issues/10517", "V0", "llama", 3.81, 20000, 1952 * 16, 1.56,
            blocks=1952, gpu="RTX3090"),
    # same, --max-model-len 29000: "kv_cache_size=2.89GiB", "# GPU blocks: 1478", "0.82x", "(23648)" tokens
    StartUp("https://github.com/vllm-project/vllm/issues/10517", "V0", "llama", 2.89, 29000, 23648, 0.82,
            blocks=1478, gpu="RTX3090"),
    # V1 (EngineCore_DP0 logs), Qwen3-14B on one GPU: "Available KV cache memory: 6.51 GiB",
    # "GPU KV cache size: 42,656 tokens", "Maximum concurrency for 32,768 tokens per request: 1.30x"
    StartUp("https://github.com/LMCache/LMCache/issues/1739", "V1", "qwen3", 6.51, 32768, 42656, 1.30),
    # V1, Qwen3-235B-A22B-FP8 on 4 x H100, --tensor-parallel-size 4, KV auto (bf16):
    # "Available KV cache memory: 8.11 GiB", "GPU KV cache size: 178,880 tokens"
    StartUp("https://github.com/vllm-project/vllm/issues/21348", "V1", "qwen3_moe_235b", 8.11, 4096, 178880, tp=4),
    # V1, a 30B-A3B FP8 checkpoint ("Model loading took 29.09" GiB: the Qwen3-30B-A3B layout is the one its
    # numbers fit), --kv-cache-dtype fp8, --max-model-len 100000:
    # "Available KV cache memory: 10.55 GiB", "GPU KV cache size: 230,528 tokens", "... 100,000 tokens ...: 2.31x"
    StartUp("https://github.com/vllm-project/vllm/issues/25350", "V1", "qwen3_moe_30b", 10.55, 100000, 230528, 2.31,
            kv_bytes=1),
    # vLLM 0.10.1.1, Qwen2-7B-Instruct on an A100 80GB, --max-model-len 16384, --gpu-memory-utilization 0.25:
    # "Available KV cache memory: 5.01 GiB", "GPU KV cache size: 93,872 tokens", "...: 5.73x"
    StartUp(DENNISLEE + "vllm-7B-1gpuA10080GB-0.25GRAM.log", "0.10.1.1", "qwen2", 5.01, 16384, 93872, 5.73,
            gpu="A100-80GB"),
    # same, --gpu-memory-utilization 0.5: "24.83 GiB", "464,848 tokens", "28.37x"
    StartUp(DENNISLEE + "vllm-7B-1gpuA10080GB-0.5GRAM.log", "0.10.1.1", "qwen2", 24.83, 16384, 464848, 28.37,
            gpu="A100-80GB"),
    # same, --tensor-parallel-size 2, 0.25: "12.02 GiB" per worker, "450,192 tokens", "27.48x", num_gpu_blocks 28137
    StartUp(DENNISLEE + "vllm-7B-2gpuA10080GB-0.25GRAM-same-node.log", "0.10.1.1", "qwen2", 12.02, 16384, 450192,
            27.48, blocks=28137, tp=2, gpu="A100-80GB"),
    # vLLM 0.10.1.1, gpt-oss-120b on 4 x A100 80GB, --tensor-parallel-size 4, --max-model-len 16384, 0.8: 18 sliding
    # (128) and 18 full layers in two KV groups of 18; max_num_batched_tokens 2048 (vLLM's serve default on an A100):
    # "Available KV cache memory: 45.32 GiB", "GPU KV cache size: 2,640,144 tokens", "...: 284.25x",
    # "num_gpu_blocks is: 330018"
    StartUp(DENNISLEE + "vllm-120B-4gpuA10080GB-0.8GRAM-diff-nodes.log", "0.10.1.1", "gpt_oss_120b", 45.32, 16384,
            2640144, 284.25, blocks=330018, tp=4, batched=2048, gpu="A100-80GB"),
    # vLLM 0.11.0rc2 (ROCm, Triton attention: 16-token pages), google/gemma-3-27b-it, --max-model-len 4096,
    # max_num_batched_tokens 8192: 10 global and 52 sliding layers in seven KV groups of 10 ("Add 8 padding
    # layers"); "Available KV cache memory: 109.86 GiB", "GPU KV cache size: 205,696 tokens", "...: 50.05x",
    # "num_gpu_blocks is: 89994"
    StartUp("https://github.com/TaintsAndTokenizersInc/vllm_multimodal_rocm_examples/blob/main/example_logs.md",
            "0.11.0", "gemma3_27b", 109.86, 4096, 205696, 50.05, blocks=89994, gpu="MI300X"),
    # vLLM 0.9.2 (a dev build after it), DeepSeek-V2-Lite on 4 x L4, --tensor-parallel-size 2
    # --pipeline-parallel-size 2 --max-model-len 1024: MLA (576 values a layer, replicated over TP); the first stage
    # holds 14 of 27 layers with "Available KV cache memory: 12.13 GiB" (the second 13 with 11.33 GiB, more
    # blocks: vLLM keeps the fewer), "GPU KV cache size: 807,792 tokens", "...: 788.86x". No FlashMLA on an L4:
    # pages of 16 tokens (807,792 is not a multiple of 64)
    StartUp("https://github.com/vllm-project/vllm/pull/20665", "0.9.2", "deepseek_v2_lite", 12.13, 1024, 807792,
            788.86, tp=2, pp=2, gpu="L4"),
]  # fmt: skip
KV_IDS = [f"{c.vllm} {c.model} tp{c.tp}pp{c.pp} {c.available_gib}GiB" for c in KV_CASES]

# (source, vLLM, config, TP, KV dtype bytes, max_model_len, logged GiB needed, logged available GiB, logged max length)
NEEDED_CASES = [
    # V1, the 30B-A3B FP8 engine above, --max-model-len 221000: "(10.12 GiB KV cache is needed, which is larger
    # than the available KV cache memory (5.59 GiB) ... the estimated maximum model length is 122080"
    ("https://github.com/vllm-project/vllm/issues/25350", "V1", "qwen3_moe_30b", 1, 1, 221000, 10.12, 5.59, 122080),
    # vLLM 0.15.2rc1, Qwen3-Coder-30B-A3B-Instruct-FP8 (max seq len 262144, KV auto): "24.0 GiB KV cache is
    # needed ... available KV cache memory (3.18 GiB) ... estimated maximum model length is 34736"
    ("https://github.com/vllm-project/vllm/issues/34076", "0.15.2", "qwen3_moe_30b", 1, 2, 262144, 24.0, 3.18, 34736),
    # vLLM 0.8.3 (a dev build), DeepSeek-V2-Lite-Chat, max seq len 32768: "0.95 GiB KV cache is needed, which is
    # larger than the available KV cache memory (0.93 GiB)" (MLA: 27 layers x 576 values; no longest logged)
    ("https://github.com/vllm-project/vllm/issues/15871", "0.8.3", "deepseek_v2_lite", 1, 2, 32768, 0.95, 0.93, None),
]

# (source, config, TP, logged "Loading model weights took" / "Model loading took" GiB per device, GPU)
WEIGHT_CASES = [
    # vllm-project/vllm#10517, V0: Llama-3.1-8B-Instruct bf16 on an RTX 3090, "Loading model weights took 14.9888 GB"
    ("vllm#10517 V0", "llama", 1, 14.9888, "RTX3090"),
    # vllm-project/vllm#10511, V0 (0.6.5): Meta-Llama-3-8B "model weights take 14.96GiB", with -tp 2 "7.48GiB"
    ("vllm#10511 V0 TP2", "llama", 2, 7.48, "H100"),
    # vllm-project/vllm#12569, V1 (0.7.1): neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8,
    # "Loading model weights took 67.7229 GB"
    ("vllm#12569 V1 w8a8", "llama_70b_w8a8", 1, 67.7229, "H100"),
    # vllm-project/vllm#16570, vLLM 0.8.3: Qwen2.5-VL-72B on 4 x A100-40GB, "model weights take 34.43GiB"
    ("vllm#16570 0.8.3 VL TP4", "qwen25_vl_72b", 4, 34.43, "A100-40GB"),
    # vllm-project/vllm#33155, vLLM 0.14.1: openai/gpt-oss-120b on one H100 (Triton MXFP4 backend),
    # "Model loading took 64.38 GiB memory"
    ("vllm#33155 0.14.1 MXFP4", "gpt_oss_120b", 1, 64.38, "H100"),
    # https://myoceane.fr/index.php/ai-vllm-a100-gemma-4/ (vLLM 0.19.0 on an A100): openai/gpt-oss-20b,
    # "Model loading took 13.72 GiB memory" (Marlin: each expert's width 2880 padded to 2944)
    ("myoceane.fr 0.19.0 MXFP4", "gpt_oss_20b", 1, 13.72, "A100-80GB"),
    # dennislee22/vLLM-benchmarking logs (vLLM 0.10.1.1, A100 80GB): Qwen2-7B-Instruct "Model loading took
    # 14.2488 GiB", with --tensor-parallel-size 2 "7.1217 GiB"; gpt-oss-120b at --tensor-parallel-size 4
    # "17.2217 GiB" (a shard's expert width 720 padded to 768: 7 % more than a quarter of the whole)
    ("dennislee22 0.10.1.1", "qwen2", 1, 14.2488, "A100-80GB"),
    ("dennislee22 0.10.1.1 TP2", "qwen2", 2, 7.1217, "A100-80GB"),
    ("dennislee22 0.10.1.1 MXFP4 TP4", "gpt_oss_120b", 4, 17.2217, "A100-80GB"),
]


def _model(name: str) -> dict:
    from tests.support.specs import LLAMA_31_8B, LLAMA_31_70B

    return {
        "llama": LLAMA_31_8B,
        "qwen3": {**QWEN3_30B_A3B, "model_type": "qwen3", "hidden_size": 5120, "intermediate_size": 17408,
                  "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 8},  # Qwen/Qwen3-14B
        "qwen3_moe_235b": QWEN3_235B_A22B_FP8,
        "qwen3_moe_30b": QWEN3_30B_A3B_FP8,
        "llama_70b_w8a8": {**LLAMA_31_70B, "quantization_config": W8A8_CHANNEL},
        "qwen25_vl_72b": QWEN25_VL_72B,
        "gpt_oss_120b": GPT_OSS_120B,
        "gpt_oss_20b": GPT_OSS_20B,
        "qwen2": QWEN2_7B,
        "deepseek_v2_lite": DEEPSEEK_V2_LITE,
        "gemma3_27b": GEMMA3_27B,
    }[name]  # fmt: skip


def _capacity(name: str, available_gib: float, max_len: int, *, tp: int = 1, pp: int = 1, kv_bytes: int = 2,
              batched: int = 8192, gpu: str = "H100") -> memory.KvCapacity:  # fmt: skip
    """The KV side of an engine whose available KV memory the log states (no overhead to estimate)."""
    a, dev = arch(_model(name)), device(gpu)
    block = memory.kv_block_size(a, dev) if dev is not None else memory.VLLM_BLOCK
    budget = int(available_gib * GIB)
    return memory.kv_capacity(a, tp, pp, kv_bytes, max_model_len=max_len, batched_tokens=batched, block=block,
                              device=budget, budget=budget)  # fmt: skip


@pytest.mark.parametrize("case", KV_CASES, ids=KV_IDS)
def test_kv_tokens_blocks_and_concurrency_reproduce_vllms_start_up_log(case: StartUp) -> None:
    kv = _capacity(case.model, case.available_gib, case.max_model_len, tp=case.tp, pp=case.pp,
                   kv_bytes=case.kv_bytes, batched=case.batched, gpu=case.gpu)  # fmt: skip
    assert close(kv.tokens, case.tokens), (case.source, kv.tokens, case.tokens)
    assert kv.tokens % kv.block == 0 and case.tokens % kv.block == 0, (case.source, kv.block)
    if case.blocks is not None:
        assert close(kv.blocks, case.blocks), (case.source, kv.blocks, case.blocks)
    if case.concurrency is not None:
        assert close(kv.sequences, case.concurrency), (case.source, kv.sequences, case.concurrency)


@pytest.mark.parametrize(
    ("source", "vllm", "name", "tp", "kv_bytes", "max_len", "needed", "gib", "longest"), NEEDED_CASES
)
def test_one_sequences_kv_and_the_longest_that_fits_reproduce_vllms_refusal(
    source: str, vllm: str, name: str, tp: int, kv_bytes: int, max_len: int, needed: float, gib: float, longest
) -> None:
    kv = _capacity(name, gib, max_len, tp=tp, kv_bytes=kv_bytes)
    assert close(kv.one_sequence / GIB, needed), (source, kv.one_sequence / GIB)
    if longest is not None:
        assert close(memory.kv_tokens(kv.available, kv.bytes_per_token), longest), source
    assert kv.one_sequence > kv.upper  # the refusal the log shows: memory.kv_one_sequence


@pytest.mark.parametrize(("source", "name", "tp", "gib", "gpu"), WEIGHT_CASES)
def test_engine_weights_reproduce_vllms_loaded_weights(source: str, name: str, tp: int, gib: float, gpu: str) -> None:
    from tests.support.specs import plan

    shape = plan(num_inference_engines=8 // tp, inference_engine_tensor_parallel_size=tp)
    topo = topology(shape, gpu_variant=gpu)
    composed = composed_of(topo, recipe())
    kv = memory.engine_kv(arch(_model(name)), Geometry.from_recipe(composed), composed, device(gpu))
    assert close(kv.weights / GIB, gib), (source, kv.weights / GIB)


def test_multi_head_latent_attention_pages_64_tokens_on_hopper_and_16_elsewhere() -> None:
    """vLLM forces FlashMLA's block size of 64 on Hopper (platforms/cuda.py: "Forcing kv cache block
    size to 64 for FlashMLA backend"); the L4 log above (Triton MLA) shows 16-token pages."""
    lite = arch(DEEPSEEK_V2_LITE)
    assert memory.kv_block_size(lite, device("H100")) == memory.kv_block_size(lite, device("H200")) == 64
    assert memory.kv_block_size(lite, device("L4")) == memory.kv_block_size(lite, device("A100-80GB")) == 16
    assert memory.kv_block_size(arch(QWEN3_30B_A3B), device("H100")) == 16  # not MLA
    kv = engine(DEEPSEEK_V2_LITE)
    assert kv.block == 64 and kv.tokens > 0 and kv.tokens % 64 == 0
    assert kv.blocks_per_sequence == -(-kv.max_model_len // 64)


def test_the_kv_cases_are_ten_public_logs_of_five_architectures_and_two_vllm_versions() -> None:
    """Issue 30's bar for the engine side: blocks, KV tokens or concurrency (not loaded weights) of at
    least ten public start-up logs, five architectures, two vLLM versions, each citing where it is."""
    cases = [(c.source, c.vllm, c.model) for c in KV_CASES] + [c[:3] for c in NEEDED_CASES]
    assert len(cases) >= 10 and len({source for source, _, _ in cases}) >= 10  # ten logs, not one log ten times
    assert len({arch(_model(name)).model_type for _, _, name in cases}) >= 5
    assert len({vllm for _, vllm, _ in cases} - {"V1"}) >= 2  # versions named, beyond "some V1"
    assert all(source.startswith("https://") for source, _, _ in cases)


@pytest.mark.parametrize(
    ("source", "tp", "batched", "logged_gib"),
    [
        # vllm-project/vllm#10517, V0 profiles max_num_batched_tokens = max_model_len (256 sequences):
        # peak_torch_memory 17.06 / 17.98 GiB less 14.99 GiB of weights at 20000 / 29000 tokens
        ("vllm#10517 20k", 1, 20000, 17.06 - 14.99),
        ("vllm#10517 29k", 1, 29000, 17.98 - 14.99),
        # vllm-project/vllm#10511: Meta-Llama-3-8B, 8192 tokens: "PyTorch activation peak memory 1.26GiB"
        ("vllm#10511 TP1", 1, 8192, 1.26),
        ("vllm#10511 TP2", 2, 8192, 1.26),
    ],
)
def test_the_profiling_peak_follows_the_model_tp_and_batched_tokens(
    source: str, tp: int, batched: int, logged_gib: float
) -> None:
    """The engine's profiling forward (the MLP's gate/up and activation at max_num_batched_tokens, over
    TP) and its sampler warm-up (fp32 logits of max_num_seqs, not sharded): an estimate, within 35 %."""
    from tests.support.specs import LLAMA_31_8B

    peak = memory.profile_peak(arch(LLAMA_31_8B), tp, batched, 256)
    assert close(peak / GIB, logged_gib, 0.35), (source, peak / GIB)
    assert memory.profile_peak(arch(LLAMA_31_8B), tp, 2 * batched, 256) >= peak
    assert memory.profile_peak(arch(LLAMA_31_8B), tp, 4 * batched, 256) > memory.profile_peak(
        arch(LLAMA_31_8B), 2 * tp, 4 * batched, 256
    )  # a forward-bound peak shrinks with TP


@pytest.mark.parametrize(
    ("variant", "gib"),
    [("H800", 79.22), ("H20-141GB", 140.4), ("h20_141gb", 140.4), ("RTX5090", 31.84), ("RTX 5070 Ti", 15.92),
     ("GB10", 119.21), ("RTX-PRO-6000", 95.59)],
)  # fmt: skip
def test_the_device_table_knows_the_gpus_rl_users_run_on(variant: str, gib: float) -> None:
    found = device(variant)
    assert found is not None and round(found.bytes / GIB, 2) == gib


@pytest.mark.parametrize(
    "variant", ["MI300X", "MI325X", "cpu"], ids=["amd-instinct-skyrls-stack-does-not-run-there", "mi325x", "not-a-gpu"]
)
def test_a_device_not_in_the_table_is_not_sized(variant: str) -> None:
    assert device(variant) is None
