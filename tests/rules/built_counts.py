"""Parameter counts and attention shapes that transformers builds for small configs of every family.

Each entry is a `config.json` written here and what transformers (the trl-cpu runtime's pinned
version, on the meta device) built from it: the total parameter count, the K and V projection
widths over all layers (0 for multi-head latent attention, which has no k_proj), the sliding
layers of its `layer_types` (where the config has a window) and, for families whose parameter
names sort into our components, the count by component. tests/rules/test_built_counts.py holds
`rlaunch.rules.model_shape` to these numbers in the fast lane; tests/runtimes/test_architecture_counts.py
rebuilds every entry with transformers and asserts the numbers here are still what it builds. Sizes
vary each knob away from its default (biases, tying, head_dim, GQA, dense layers between MoE ones,
window patterns, MLA with and without a q LoRA rank, vision towers' patch, merge and MLP sizes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BASE = {
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
}

# Families transformers has not built here yet: their table entries need the trl-cpu runtime's
# transformers, which the session that added them could not run; until then each is held to its
# published total (tests/rules/test_rollout_knobs.py), and the entries are to be added, not guessed.
NOT_YET_BUILT = frozenset({"glm4_moe", "glm4_moe_lite", "minimax_m2", "qwen3_next", "qwen3_vl", "qwen3_vl_moe"})


@dataclass(frozen=True)
class Built:
    config: dict[str, Any]
    total: int
    kv_width: int  # k_proj + v_proj output features over all layers
    sliding_layers: int | None = None  # layer_types' "sliding_attention" count; None: no window
    by_component: dict[str, int] = field(default_factory=dict)  # empty: names that do not sort into components

    @property
    def id(self) -> str:
        return self.config["model_type"]


BUILT = [
    Built(
        config={
            **BASE,
            "num_hidden_layers": 3,
            "model_type": "llama",
            "intermediate_size": 688,
            "attention_bias": True,
            "mlp_bias": True,
        },
        total=2597280,
        kv_width=384,
        by_component={"embeddings": 256000, "attention": 493440, "mlp": 1590048, "norms": 1792, "lm_head": 256000},
    ),
    Built(
        config={**BASE, "model_type": "llama", "intermediate_size": 512, "tie_word_embeddings": True},
        total=1371392,
        kv_width=256,
        by_component={"embeddings": 256000, "attention": 327680, "mlp": 786432, "norms": 1280},
    ),
    Built(
        config={
            **BASE,
            "num_key_value_heads": 4,
            "model_type": "qwen2",
            "intermediate_size": 512,
            "tie_word_embeddings": True,
        },
        total=1437952,
        kv_width=512,
        by_component={"embeddings": 256000, "attention": 394240, "mlp": 786432, "norms": 1280},
    ),
    Built(
        config={**BASE, "model_type": "qwen2", "intermediate_size": 512},
        total=1628160,
        kv_width=256,
        by_component={"embeddings": 256000, "attention": 328448, "mlp": 786432, "norms": 1280, "lm_head": 256000},
    ),
    Built(
        config={
            **BASE,
            "num_attention_heads": 4,
            "model_type": "qwen3",
            "intermediate_size": 512,
            "head_dim": 96,
            "tie_word_embeddings": False,
        },
        total=1889920,
        kv_width=768,
        by_component={"embeddings": 256000, "attention": 589824, "norms": 1664, "mlp": 786432, "lm_head": 256000},
    ),
    Built(
        config={**BASE, "model_type": "mistral", "intermediate_size": 512, "sliding_window": 64},
        total=1627392,
        kv_width=256,
        by_component={"embeddings": 256000, "attention": 327680, "mlp": 786432, "norms": 1280, "lm_head": 256000},
    ),
    Built(
        config={
            **BASE,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "model_type": "gemma",
            "intermediate_size": 512,
            "head_dim": 128,
        },
        total=1699072,
        kv_width=512,
        by_component={"embeddings": 256000, "attention": 655360, "mlp": 786432, "norms": 1280},
    ),
    Built(
        config={
            **BASE,
            "num_hidden_layers": 4,
            "num_attention_heads": 4,
            "model_type": "qwen3_moe",
            "intermediate_size": 512,
            "moe_intermediate_size": 128,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "decoder_sparse_step": 2,
            "mlp_only_layers": [3],
            "head_dim": 64,
        },
        total=3269376,
        kv_width=1024,
        by_component={
            "embeddings": 256000,
            "attention": 786432,
            "norms": 2816,
            "mlp": 1179648,
            "experts": 786432,
            "router": 2048,
            "lm_head": 256000,
        },
    ),
    Built(
        config={
            **BASE,
            "model_type": "mixtral",
            "intermediate_size": 384,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
        },
        total=3202304,
        kv_width=256,
        by_component={
            "embeddings": 256000,
            "attention": 327680,
            "router": 2048,
            "experts": 2359296,
            "norms": 1280,
            "lm_head": 256000,
        },
    ),
    Built(
        config={
            **BASE,
            "num_hidden_layers": 3,
            "model_type": "gemma2",
            "intermediate_size": 512,
            "head_dim": 32,
            "sliding_window": 64,
        },
        total=1930496,
        kv_width=384,
        sliding_layers=2,
        by_component={"embeddings": 256000, "attention": 491520, "mlp": 1179648, "norms": 3328},
    ),
    Built(
        config={
            **BASE,
            "num_hidden_layers": 7,
            "model_type": "gemma3_text",
            "intermediate_size": 512,
            "head_dim": 32,
            "sliding_window": 64,
        },
        total=4163264,
        kv_width=896,
        sliding_layers=6,
        by_component={"embeddings": 256000, "attention": 1146880, "norms": 7872, "mlp": 2752512},
    ),
    Built(
        config={
            **BASE,
            "num_hidden_layers": 7,
            "model_type": "gemma3_text",
            "intermediate_size": 512,
            "head_dim": 32,
            "sliding_window": 64,
            "sliding_window_pattern": 3,
            "tie_word_embeddings": False,
        },
        total=4419264,
        kv_width=896,
        sliding_layers=5,
        by_component={"embeddings": 256000, "attention": 1146880, "norms": 7872, "mlp": 2752512, "lm_head": 256000},
    ),
    Built(
        config={
            **BASE,
            "num_hidden_layers": 4,
            "model_type": "qwen2_moe",
            "intermediate_size": 512,
            "moe_intermediate_size": 128,
            "shared_expert_intermediate_size": 384,
            "num_experts": 8,
            "num_experts_per_tok": 2,
            "decoder_sparse_step": 2,
            "mlp_only_layers": [1],
        },
        total=3434496,
        kv_width=512,
    ),
    Built(
        config={
            **BASE,
            "num_hidden_layers": 3,
            "model_type": "qwen2_moe",
            "intermediate_size": 512,
            "moe_intermediate_size": 96,
            "shared_expert_intermediate_size": 0,
            "num_experts": 4,
            "num_experts_per_tok": 1,
            "mlp_only_layers": [0, 7],
        },
        total=1992064,
        kv_width=384,
    ),
    Built(
        config={
            **BASE,
            "num_hidden_layers": 3,
            "model_type": "gpt_oss",
            "intermediate_size": 192,
            "num_local_experts": 4,
            "num_experts_per_tok": 2,
            "head_dim": 32,
            "sliding_window": 64,
        },
        total=2787492,
        kv_width=384,
        sliding_layers=2,
    ),
    Built(
        config={
            **BASE,
            "num_hidden_layers": 3,
            "num_key_value_heads": 8,
            "model_type": "deepseek_v3",
            "intermediate_size": 512,
            "moe_intermediate_size": 128,
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "n_shared_experts": 1,
            "first_k_dense_replace": 1,
            "kv_lora_rank": 64,
            "q_lora_rank": 96,
            "qk_rope_head_dim": 16,
            "qk_nope_head_dim": 32,
            "v_head_dim": 48,
            "n_group": 2,
            "topk_group": 1,
        },
        total=3344608,
        kv_width=0,
    ),
    Built(
        config={
            **BASE,
            "num_hidden_layers": 3,
            "num_key_value_heads": 8,
            "model_type": "deepseek_v2",
            "intermediate_size": 512,
            "moe_intermediate_size": 128,
            "n_routed_experts": 8,
            "num_experts_per_tok": 2,
            "n_shared_experts": 2,
            "first_k_dense_replace": 2,
            "kv_lora_rank": 64,
            "q_lora_rank": None,
            "qk_rope_head_dim": 16,
            "qk_nope_head_dim": 32,
            "v_head_dim": 32,
            "topk_method": "greedy",
        },
        total=2936768,
        kv_width=0,
    ),
    Built(
        config={
            **BASE,
            "model_type": "qwen2_vl",
            "intermediate_size": 512,
            "vision_config": {
                "depth": 2,
                "embed_dim": 64,
                "hidden_size": 256,
                "num_heads": 4,
                "patch_size": 14,
                "spatial_merge_size": 2,
                "temporal_patch_size": 2,
            },
        },
        total=1935104,
        kv_width=256,
    ),
    Built(
        config={
            **BASE,
            "model_type": "qwen2_vl",
            "intermediate_size": 512,
            "vision_config": {
                "depth": 2,
                "embed_dim": 64,
                "hidden_size": 256,
                "num_heads": 4,
                "patch_size": 8,
                "spatial_merge_size": 3,
                "temporal_patch_size": 3,
                "mlp_ratio": 2,
            },
        },
        total=2212160,
        kv_width=256,
    ),
    Built(
        config={
            **BASE,
            "model_type": "qwen2_5_vl",
            "intermediate_size": 512,
            "vision_config": {
                "depth": 2,
                "hidden_size": 64,
                "intermediate_size": 160,
                "num_heads": 4,
                "out_hidden_size": 256,
            },
        },
        total=1930816,
        kv_width=256,
    ),
    Built(
        config={
            **BASE,
            "model_type": "qwen2_5_vl",
            "intermediate_size": 512,
            "tie_word_embeddings": True,
            "vision_config": {
                "depth": 3,
                "hidden_size": 64,
                "intermediate_size": 160,
                "num_heads": 4,
                "out_hidden_size": 256,
                "patch_size": 10,
                "temporal_patch_size": 1,
                "spatial_merge_size": 3,
            },
        },
        total=2015104,
        kv_width=256,
    ),
]
