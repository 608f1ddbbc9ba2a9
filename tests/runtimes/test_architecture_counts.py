"""Evidence: the pure architecture facts equal what transformers itself builds.

Source of truth: transformers (the trl-cpu runtime's pinned version), which builds each model
on the meta device from a config written here (no download) in the runtime's own venv
(tests/runtimes/transformers_counts.py); the launcher side never imports transformers. Every
supported family, dense and MoE, with the knobs that change the count: q/k/v(/o) biases, MLP
biases, tied and untied embeddings (stated and by the family's default), an explicit head_dim,
GQA, dense layers between MoE layers (`decoder_sparse_step`, `mlp_only_layers`).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict
from pathlib import Path

import pytest

from rlaunch.rules.model_shape import FAMILIES, Architecture
from rlaunch.skyrl import ModelFacts

SCRIPT = Path(__file__).with_name("transformers_counts.py")
BASE = {
    "hidden_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "vocab_size": 1000,
}
CONFIGS = [
    {
        **BASE,
        "model_type": "llama",
        "intermediate_size": 688,
        "num_hidden_layers": 3,
        "attention_bias": True,
        "mlp_bias": True,
    },
    {**BASE, "model_type": "llama", "intermediate_size": 512, "tie_word_embeddings": True},
    {**BASE, "model_type": "qwen2", "intermediate_size": 512, "num_key_value_heads": 4, "tie_word_embeddings": True},
    {**BASE, "model_type": "qwen2", "intermediate_size": 512},
    {
        **BASE,
        "model_type": "qwen3",
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "head_dim": 96,
        "tie_word_embeddings": False,
    },
    {**BASE, "model_type": "mistral", "intermediate_size": 512},
    {
        **BASE,
        "model_type": "gemma",
        "intermediate_size": 512,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 128,
    },
    {
        **BASE,
        "model_type": "qwen3_moe",
        "intermediate_size": 512,
        "moe_intermediate_size": 128,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "num_hidden_layers": 4,
        "decoder_sparse_step": 2,
        "mlp_only_layers": [3],
        "num_attention_heads": 4,
        "head_dim": 64,
    },
    {**BASE, "model_type": "mixtral", "intermediate_size": 384, "num_local_experts": 4, "num_experts_per_tok": 2},
]


@pytest.fixture(scope="module")
def built(trl_env) -> list[dict]:
    env, _ = trl_env
    out = subprocess.run(
        [env.python, str(SCRIPT)], input=json.dumps(CONFIGS), capture_output=True, text=True, timeout=600, check=True
    )
    return json.loads(out.stdout)


def test_every_supported_family_is_covered() -> None:
    """Each family is built by transformers here, or (families the runtime's transformers does not
    build, or names apart: MLA's norms, gpt-oss's router, vision towers) held to its published total."""
    from tests.rules.test_memory_model import PUBLISHED_TOTALS

    published = {config["model_type"] for config, _, _ in PUBLISHED_TOTALS}
    assert {c["model_type"] for c in CONFIGS} | published == set(FAMILIES)


@pytest.mark.parametrize("index", range(len(CONFIGS)), ids=[c["model_type"] for c in CONFIGS])
def test_parameters_and_kv_width_equal_transformers(built: list[dict], index: int) -> None:
    facts = ModelFacts.from_hf_config(CONFIGS[index])
    arch = facts.architecture
    assert isinstance(arch, Architecture)
    ours = {k: v for k, v in asdict(arch.params).items() if v}
    assert ours == built[index]["by_component"]
    assert arch.params.total == built[index]["total"]
    # K and V bytes per token: transformers' k_proj + v_proj widths over all layers, 2 bytes each (bf16).
    assert arch.kv_bytes_per_token(2) == 2 * built[index]["kv_width"]
