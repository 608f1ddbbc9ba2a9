"""`rlaunch.rules.model_shape` at its edges: the numbers a config.json may hold (zero, negative,
booleans, floats, strings), the keys each family names its settings by (and the ones it ignores),
the defaults transformers takes where a config leaves a key out, and the reason given for what
cannot be sized. Exact counts by family: test_built_counts.py; published totals: test_memory_model.py."""

from __future__ import annotations

from typing import Any

import pytest

from rlaunch.rules import memory
from rlaunch.rules.model_shape import FAMILIES, Architecture, Unsized, _padded, from_hf_config
from tests.support.built_counts import BASE

LLAMA = {**BASE, "model_type": "llama", "intermediate_size": 512}
MIXTRAL = {**BASE, "model_type": "mixtral", "intermediate_size": 384, "num_local_experts": 4, "num_experts_per_tok": 2}
DEEPSEEK = {
    **BASE,
    "model_type": "deepseek_v3",
    "num_hidden_layers": 8,
    "intermediate_size": 512,
    "moe_intermediate_size": 128,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "kv_lora_rank": 64,
    "q_lora_rank": 96,
    "qk_rope_head_dim": 16,
    "qk_nope_head_dim": 32,
    "v_head_dim": 32,
}
QWEN3_MOE = {
    **BASE,
    "model_type": "qwen3_moe",
    "num_hidden_layers": 6,
    "moe_intermediate_size": 128,
    "num_experts": 8,
    "num_experts_per_tok": 2,
}


def arch(config: dict[str, Any]) -> Architecture:
    a = from_hf_config(config)
    assert isinstance(a, Architecture), a
    return a


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (0, "num_hidden_layers=0"),
        (-2, "num_hidden_layers=-2"),
        (True, "num_hidden_layers=True"),
        (2.0, "num_hidden_layers=2.0"),
        (2.5, "num_hidden_layers=2.5"),
        ("2", "num_hidden_layers='2'"),
        (None, "num_hidden_layers=None"),
    ],
)
def test_a_count_that_is_no_positive_integer_is_named_not_sized(value: Any, reason: str) -> None:
    assert from_hf_config({**LLAMA, "num_hidden_layers": value}) == Unsized(
        "llama", f"config.json lacks a usable {reason}"
    )


def test_one_is_a_count() -> None:
    assert arch({**LLAMA, "num_hidden_layers": 1}).layers == 1


def test_a_missing_key_and_an_unknown_family_or_packing_are_named() -> None:
    no_vocab = {k: v for k, v in LLAMA.items() if k != "vocab_size"}
    assert from_hf_config(no_vocab) == Unsized("llama", "config.json lacks a usable vocab_size=None")
    untyped = {k: v for k, v in LLAMA.items() if k != "model_type"}
    assert from_hf_config(untyped) == Unsized("unknown", f"model_type 'unknown' is not one of {sorted(FAMILIES)}")
    assert from_hf_config({**LLAMA, "quantization_config": {"quant_method": "bitsandbytes"}}) == Unsized(
        "llama", "quant_method 'bitsandbytes' is not one of ['awq', 'compressed-tensors', 'fp8', 'gptq', 'mxfp4']"
    )
    assert from_hf_config({**LLAMA, "quantization_config": {"bits": 4}}) == Unsized(
        "llama", "quant_method '' is not one of ['awq', 'compressed-tensors', 'fp8', 'gptq', 'mxfp4']"
    )


def test_quantization_methods_and_block_scales() -> None:
    fp8 = arch({**LLAMA, "quantization_config": {"quant_method": "FP8", "weight_block_size": [128, 64]}})
    assert fp8.quantization is not None
    assert (fp8.quantization.method, fp8.quantization.bytes_per_weight) == ("fp8", 1 + 4 / (128 * 64))
    per_tensor = arch({**LLAMA, "quantization_config": {"quant_method": "fp8"}}).quantization
    assert per_tensor is not None and per_tensor.bytes_per_weight == 1
    mxfp4 = arch({**LLAMA, "quantization_config": {"quant_method": "mxfp4"}}).quantization
    assert mxfp4 is not None and (mxfp4.method, mxfp4.components) == ("mxfp4", ("experts",))


def test_padding_to_a_multiple() -> None:
    assert _padded(100, 64) == 128 / 100
    assert _padded(128, 64) == 1.0
    assert _padded(100, 0) == 1.0


def test_the_scalar_facts_of_a_config() -> None:
    a = arch({**LLAMA, "torch_dtype": "float16", "max_position_embeddings": 4096, "tie_word_embeddings": True})
    assert (a.weight_dtype, a.max_positions, a.tied_embeddings, a.model_type) == ("float16", 4096, True, "llama")
    assert arch({**LLAMA, "dtype": "float32"}).weight_dtype == "float32"  # transformers 5 writes `dtype`
    plain = arch(LLAMA)
    assert (plain.weight_dtype, plain.max_positions, plain.tied_embeddings) == ("bfloat16", None, False)
    assert arch({**LLAMA, "max_position_embeddings": "4096"}).max_positions is None
    # a head_dim the config does not state is hidden // heads, a whole number
    odd = arch({**LLAMA, "hidden_size": 250})
    assert odd.head_dim == 31 and isinstance(odd.head_dim, int)


def test_an_moe_model_without_dense_layers_has_no_dense_width() -> None:
    a = arch(MIXTRAL)
    assert (a.intermediate, a.moe_layers, a.expert_intermediate) == (0, 2, 384)


def test_gpt_oss_names_its_experts_per_token_its_own_way() -> None:
    gpt_oss = {**BASE, "model_type": "gpt_oss", "intermediate_size": 192, "num_local_experts": 4, "head_dim": 32}
    assert arch({**gpt_oss, "experts_per_token": 3}).experts_per_token == 3
    assert arch({**gpt_oss, "experts_per_token": 3, "num_experts_per_tok": 1}).experts_per_token == 1
    assert isinstance(from_hf_config(gpt_oss), Unsized)


@pytest.mark.parametrize(
    ("changes", "moe_layers"),
    [
        ({}, 8),  # no first_k_dense_replace: every layer routes
        ({"first_k_dense_replace": 3}, 5),
        ({"first_k_dense_replace": 8}, 0),
        ({"first_k_dense_replace": 1, "moe_layer_freq": 2}, 3),  # of layers 1..7, the even ones: 2, 4, 6
        ({"first_k_dense_replace": 2, "moe_layer_freq": 3}, 2),  # layers 3 and 6
    ],
)
def test_deepseek_moe_layers(changes: dict[str, Any], moe_layers: int) -> None:
    a = arch({**DEEPSEEK, **changes})
    assert a.moe_layers == moe_layers and isinstance(a.moe_layers, int)
    assert a.kv_heads == 1  # MLA caches one latent
    assert a.shared_intermediate == 0  # no n_shared_experts: none


def test_deepseek_v3s_correction_bias_is_a_router_parameter_per_expert() -> None:
    plain, biased = arch(DEEPSEEK), arch({**DEEPSEEK, "topk_method": "noaux_tc"})
    assert plain.params.router == 8 * 8 * 256
    assert biased.params.router == 8 * (8 * 256 + 8)
    assert arch({**DEEPSEEK, "n_shared_experts": 2}).shared_intermediate == 2 * 128


@pytest.mark.parametrize(
    ("changes", "moe_layers"),
    [
        ({}, 6),
        ({"decoder_sparse_step": 2}, 3),  # layers 1, 3, 5
        ({"num_hidden_layers": 5, "decoder_sparse_step": 2}, 2),  # layers 1, 3
        ({"decoder_sparse_step": 3, "mlp_only_layers": [2]}, 1),  # layer 5 only
        ({"decoder_sparse_step": 3, "mlp_only_layers": [1]}, 2),  # layer 1 is dense anyway
        ({"mlp_only_layers": [0, 6, -1, "3"]}, 5),  # only layer 0 of the listed is a layer
    ],
)
def test_qwen_moe_layers(changes: dict[str, Any], moe_layers: int) -> None:
    a = arch({**QWEN3_MOE, "intermediate_size": 512, **changes})
    assert a.moe_layers == moe_layers and isinstance(a.moe_layers, int)


def test_only_qwen2_moe_has_a_shared_expert() -> None:
    config = {**QWEN3_MOE, "shared_expert_intermediate_size": 384}
    assert arch(config).params == arch(QWEN3_MOE).params and arch(config).shared_intermediate == 0
    assert arch({**config, "model_type": "qwen2_moe"}).shared_intermediate == 384


V25 = {"depth": 2, "hidden_size": 64, "intermediate_size": 160, "num_heads": 4, "out_hidden_size": 256}


@pytest.mark.parametrize("key", ["in_channels", "in_chans"])
def test_a_vision_towers_input_channels_by_either_name(key: str) -> None:
    base = arch({**LLAMA, "model_type": "qwen2_5_vl", "vision_config": V25})
    four = arch({**LLAMA, "model_type": "qwen2_5_vl", "vision_config": {**V25, key: 4}})
    # the patch embedding: channels x temporal patch 2 x 14 x 14 x width 64
    assert four.params.vision - base.params.vision == 1 * 2 * 14 * 14 * 64


MISTRAL = {**LLAMA, "model_type": "mistral"}


@pytest.mark.parametrize(
    ("config", "window", "sliding"),
    [
        ({**MISTRAL, "sliding_window": 4096}, 4096, 2),
        ({**MISTRAL, "sliding_window": 1}, 1, 2),
        ({**MISTRAL, "sliding_window": 0}, None, 0),
        ({**MISTRAL, "sliding_window": True}, None, 0),
        ({**MISTRAL, "sliding_window": None}, None, 0),
        ({**LLAMA, "model_type": "qwen2", "sliding_window": 4096}, None, 0),  # qwen2 slides only when told
        ({**LLAMA, "model_type": "qwen2", "sliding_window": 4096, "use_sliding_window": True}, 4096, 2),
        (
            {
                **MISTRAL,
                "num_hidden_layers": 3,
                "sliding_window": 8,
                "layer_types": ["full_attention", "sliding_attention", "full_attention"],
            },
            8,
            1,
        ),
        ({**MISTRAL, "sliding_window": 8, "layer_types": ["full_attention"]}, 8, 2),  # not one per layer: ignored
        ({**LLAMA, "model_type": "gemma3_text", "num_hidden_layers": 12, "sliding_window": 512}, 512, 10),
        ({**LLAMA, "model_type": "gemma2", "num_hidden_layers": 5, "sliding_window": 512}, 512, 3),
    ],
)
def test_sliding_windows(config: dict[str, Any], window: int | None, sliding: int) -> None:
    a = arch(config)
    assert (a.sliding_window, a.sliding_layers) == (window, sliding)


def test_the_kv_cache_of_one_token() -> None:
    a = arch(LLAMA)
    assert memory.kv_bytes_per_token(a) == 2 * 2 * 2 * 32 * 2  # K and V, 2 layers, 2 KV heads of 32, bf16


def ct(weights: dict[str, Any]) -> dict[str, Any]:
    """A compressed-tensors quantization_config whose first group quantizes weights as `weights`."""
    return {"quant_method": "compressed-tensors", "config_groups": {"group_0": {"weights": weights}}}


@pytest.mark.parametrize(
    ("q", "method", "bytes_per_weight"),
    [
        ({"quant_method": "awq", "bits": 4, "group_size": 128}, "awq", 0.5 + 2.5 / 128),
        ({"quant_method": "AWQ", "w_bit": 8, "q_group_size": 64}, "awq", 1 + 3 / 64),  # AutoAWQ's keys
        ({"quant_method": "awq"}, "awq", 0.5 + 2.5 / 128),  # 4 bits in groups of 128 unless said
        ({"quant_method": "gptq", "bits": 8, "group_size": 1}, "gptq", 1 + 3.0),
        ({"quant_method": "gptq", "bits": 8, "group_size": -1}, "gptq", 1.0),  # one group per column: no scales
        ({"quant_method": "gptq", "bits": 8}, "gptq", 1 + 3 / 128),  # transformers' default group of 128
        (
            ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}),
            "compressed-tensors int4 group",
            0.5 + 2 / 128,
        ),
        (ct({"num_bits": 4, "strategy": "group", "group_size": 1}), "compressed-tensors int4 group", 0.5 + 2.0),
        (ct({"num_bits": 4, "strategy": "group"}), "compressed-tensors int4 group", 0.5),  # no group size
        (ct({"num_bits": 8, "type": "float", "strategy": "channel"}), "compressed-tensors float8 channel", 1.0),
        (ct({"num_bits": 8, "type": "float"}), "compressed-tensors float8 tensor", 1.0),
        (
            ct({"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 64]}),
            "compressed-tensors float8 block",
            1 + 4 / (128 * 64),
        ),
        (
            ct({"num_bits": 8, "type": "float", "strategy": "group", "group_size": 0, "block_structure": [32, 16]}),
            "compressed-tensors float8 group",
            1 + 4 / (32 * 16),
        ),
    ],
)
def test_packings_and_their_scales(q: dict[str, Any], method: str, bytes_per_weight: float) -> None:
    packed = arch({**LLAMA, "quantization_config": q}).quantization
    assert packed is not None
    assert (packed.method, packed.bytes_per_weight) == (method, pytest.approx(bytes_per_weight, rel=1e-12))


def test_compressed_tensors_without_groups_is_named() -> None:
    assert from_hf_config({**LLAMA, "quantization_config": ct({})}) == Unsized(
        "llama", "config.json lacks a usable num_bits=None"
    )
    empty = {"quant_method": "compressed-tensors", "config_groups": {}}
    assert from_hf_config({**LLAMA, "quantization_config": empty}) == Unsized(
        "llama", "config.json lacks a usable num_bits=None"
    )


def test_mxfp4_experts_are_padded_as_vllms_kernels_pad_them() -> None:
    """gpt-oss's experts: the hidden size to a multiple of 256, a TP shard's width to 64 on Hopper
    (Triton) and 128 before it (Marlin)."""
    gpt_oss = {
        **BASE,
        "model_type": "gpt_oss",
        "intermediate_size": 192,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "head_dim": 32,
        "quantization_config": {"quant_method": "mxfp4"},
    }
    a = arch(gpt_oss)
    packed = a.params.experts * 4.25 / 8
    assert a.stored_bytes(2, 1, hopper=True)[1] == int(packed)  # 256 and 192 are whole multiples
    assert a.stored_bytes(2, 1, hopper=False)[1] == int(packed * 256 / 192)
    assert a.stored_bytes(2, 2, hopper=True)[1] == int(packed * 128 / 96)  # a shard of 96 pads to 128
