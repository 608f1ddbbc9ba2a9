"""A model's architecture read from its own `config.json`: the numbers a memory estimate needs.

Pure and closed-form (no torch, no transformers): parameters by component, the attention shape
and the KV-cache bytes per token, for the decoder families whose layer shapes are known here:
dense Llama, Qwen2, Qwen3, Mistral and Gemma, and the MoE families Qwen3-MoE and Mixtral.
Anything else, and any quantized checkpoint, is `Unsized` with the reason: the estimate is never
guessed from a family it does not know. Tests hold every count to what transformers itself builds
for the same config (tests/runtimes/test_architecture_counts.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}


@dataclass(frozen=True)
class Family:
    """What a `model_type` decides beyond the config's numbers (transformers' defaults for it)."""

    qkv_bias: bool  # q/k/v projections carry a bias
    qk_norm: bool  # a per-head RMSNorm on q and k (Qwen3)
    tied_default: bool  # tie_word_embeddings when the config omits it
    moe: str | None = None  # "qwen3_moe": experts + dense layers by step; "mixtral": every layer


FAMILIES: dict[str, Family] = {
    "llama": Family(qkv_bias=False, qk_norm=False, tied_default=False),
    "mistral": Family(qkv_bias=False, qk_norm=False, tied_default=False),
    "qwen2": Family(qkv_bias=True, qk_norm=False, tied_default=False),
    "qwen3": Family(qkv_bias=False, qk_norm=True, tied_default=False),
    "gemma": Family(qkv_bias=False, qk_norm=False, tied_default=True),
    "qwen3_moe": Family(qkv_bias=False, qk_norm=True, tied_default=False, moe="qwen3_moe"),
    "mixtral": Family(qkv_bias=False, qk_norm=False, tied_default=False, moe="mixtral"),
}


@dataclass(frozen=True)
class Parameters:
    """Parameter counts by component (the whole model, unsharded)."""

    embeddings: int
    attention: int  # q, k, v, o projections (and their biases) over all layers
    mlp: int  # dense MLPs over all layers
    experts: int  # every MoE expert over all layers
    router: int  # MoE gates
    norms: int  # layer norms, q/k norms and the final norm
    lm_head: int  # 0 when tied to the embeddings

    @property
    def total(self) -> int:
        return self.embeddings + self.attention + self.mlp + self.experts + self.router + self.norms + self.lm_head


@dataclass(frozen=True)
class Architecture:
    """The architecture facts a memory estimate reads (see the module docstring)."""

    model_type: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    intermediate: int
    max_positions: int | None
    weight_dtype: str
    tied_embeddings: bool
    params: Parameters
    experts: int = 0  # experts per MoE layer (0: dense)
    experts_per_token: int = 0
    moe_layers: int = 0
    sliding_window: int | None = None  # attention window when on: a sequence keeps at most this much KV

    @property
    def weight_bytes_per_param(self) -> int:
        return DTYPE_BYTES.get(self.weight_dtype, 2)

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (all of them for a dense model)."""
        if not self.experts:
            return self.params.total
        return self.params.total - self.params.experts + self.params.experts * self.experts_per_token // self.experts

    def layer_params(self) -> int:
        """The largest transformer layer's parameters (what FSDP gathers at once)."""
        per_layer = (self.params.attention + self.params.norms - self.hidden) // self.layers
        dense = self.params.mlp // max(1, self.layers - self.moe_layers) if self.params.mlp else 0
        moe = (self.params.experts + self.params.router) // self.moe_layers if self.moe_layers else 0
        return per_layer + max(dense, moe)

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """K and V of every layer for one token, unsharded."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


@dataclass(frozen=True)
class Unsized:
    """A config this module cannot size, and why (shown in the plan instead of a guess)."""

    model_type: str
    reason: str


def from_hf_config(config: Mapping[str, Any]) -> Architecture | Unsized:
    """The architecture of a Hugging Face `config.json` (as a dict), or why it cannot be sized."""
    model_type = str(config.get("model_type") or "unknown")
    family = FAMILIES.get(model_type)
    if family is None:
        return Unsized(model_type, f"model_type {model_type!r} is not one of {sorted(FAMILIES)}")
    if config.get("quantization_config"):
        return Unsized(model_type, "a quantized checkpoint's weight bytes are not its dtype's")
    try:
        return _sized(config, family)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        return Unsized(model_type, f"config.json lacks a usable {exc}")


def _int(config: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if value is None or isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{key}={value!r}")
    return value


def _sized(config: Mapping[str, Any], family: Family) -> Architecture:
    layers, hidden, heads = (
        _int(config, "num_hidden_layers"),
        _int(config, "hidden_size"),
        _int(config, "num_attention_heads"),
    )
    kv_heads = _int(config, "num_key_value_heads", heads)
    head_dim = _int(config, "head_dim") if config.get("head_dim") is not None else hidden // heads
    vocab = _int(config, "vocab_size")
    tied = bool(config.get("tie_word_embeddings", family.tied_default))
    q, kv = heads * head_dim, kv_heads * head_dim
    bias = family.qkv_bias or bool(config.get("attention_bias", False))
    attention = hidden * q + 2 * hidden * kv + q * hidden
    if bias:
        attention += q + 2 * kv + (0 if family.qkv_bias else hidden)  # Qwen2: q/k/v only; attention_bias: o too
    norms = 2 * hidden + (2 * head_dim if family.qk_norm else 0)
    experts = experts_per_token = moe_layers = 0
    mlp = expert_params = router = 0
    intermediate = _int(config, "intermediate_size") if config.get("intermediate_size") is not None else 0
    if family.moe == "mixtral":
        experts, experts_per_token = _int(config, "num_local_experts"), _int(config, "num_experts_per_tok")
        moe_layers = layers
        expert_params = layers * experts * 3 * hidden * _int(config, "intermediate_size")
        router = layers * hidden * experts
    elif family.moe == "qwen3_moe":
        experts, experts_per_token = _int(config, "num_experts"), _int(config, "num_experts_per_tok")
        step = _int(config, "decoder_sparse_step", 1)
        dense_only = {i for i in config.get("mlp_only_layers") or () if isinstance(i, int) and 0 <= i < layers}
        moe_layers = layers // step - sum(1 for i in dense_only if (i + 1) % step == 0)
        expert_params = moe_layers * experts * 3 * hidden * _int(config, "moe_intermediate_size")
        router = moe_layers * hidden * experts
        mlp = (layers - moe_layers) * 3 * hidden * intermediate if layers > moe_layers else 0
    else:
        mlp = layers * 3 * hidden * _int(config, "intermediate_size")
        if config.get("mlp_bias"):
            mlp += layers * (2 * intermediate + hidden)
    params = Parameters(
        embeddings=vocab * hidden,
        attention=layers * attention,
        mlp=mlp,
        experts=expert_params,
        router=router,
        norms=layers * norms + hidden,
        lm_head=0 if tied else vocab * hidden,
    )
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    max_positions = config.get("max_position_embeddings")
    window = config.get("sliding_window")
    windowed = family.moe == "mixtral" or str(config["model_type"]) == "mistral" or config.get("use_sliding_window")
    return Architecture(
        model_type=str(config["model_type"]),
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        vocab=vocab,
        intermediate=intermediate or _int(config, "moe_intermediate_size"),
        max_positions=max_positions if isinstance(max_positions, int) else None,
        weight_dtype=dtype,
        tied_embeddings=tied,
        params=params,
        experts=experts,
        experts_per_token=experts_per_token,
        moe_layers=moe_layers,
        sliding_window=window if windowed and isinstance(window, int) and window > 0 else None,
    )
