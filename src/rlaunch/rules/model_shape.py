"""A model's architecture read from its own `config.json`: the numbers a memory estimate needs.

Pure and closed-form (no torch, no transformers): parameters by component, the attention shape
and the KV-cache bytes per token, for the decoder families whose layer shapes are known here:
dense Llama, Qwen2, Qwen3, Mistral and Gemma 1/2/3; the MoE families Qwen3-MoE, Qwen2-MoE (shared
expert), Mixtral, gpt-oss (attention sinks, alternating sliding windows) and DeepSeek-V2/V3 and
Kimi-K2 and GLM-4.7-Flash (multi-head latent attention, shared experts, dense first layers), GLM-4.5
to 4.7 (their experts under grouped-query attention), MiniMax-M2 and Qwen3-Next (linear attention in
most layers: only its full-attention layers hold KV); the
vision-language Qwen2-VL/Qwen2.5-VL and Qwen3-VL/Qwen3-VL-MoE (the vision tower's weights beside the
language model, which Qwen3-VL states in `text_config`). A checkpoint's
`quantization_config` (FP8 block/channel/tensor, `compressed-tensors`, MXFP4, AWQ, GPTQ) decides
the bytes its weights take when a rollout engine loads them; parameter counts are the model's,
whatever the packing (training holds them in its own dtypes). Anything else is `Unsized` with
the reason: the estimate is never guessed from a family it does not know. Tests hold every count
exactly to what transformers builds for a small config of each family (tests/support/built_counts.py,
rebuilt by tests/runtimes/test_architecture_counts.py) and full checkpoints to their published
totals (tests/rules/test_memory_model.py, tests/rules/test_rollout_knobs.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
QUANTIZED = ("attention", "mlp", "experts")  # the components whose linear weights a quantizer packs


@dataclass(frozen=True)
class Family:
    """What a `model_type` decides beyond the config's numbers (transformers' defaults for it)."""

    qkv_bias: bool  # q/k/v projections carry a bias
    qk_norm: bool  # a per-head RMSNorm on q and k (Qwen3, Gemma 3; GLM-4.5 where `use_qk_norm` says so)
    tied_default: bool  # tie_word_embeddings when the config omits it
    moe: str | None = None  # how experts are laid out: "qwen3_moe", "qwen2_moe", "mixtral", "gpt_oss", "deepseek"
    norms_per_layer: int = 2  # Gemma 2/3 add pre- and post-feed-forward norms
    mla: bool = False  # multi-head latent attention (DeepSeek-V2/V3, Kimi-K2)
    windows: str | None = None  # sliding-window layout: "all" (Mistral), "alternate" (Gemma 2), "pattern" (Gemma 3)
    vision: str | None = (
        None  # a vision tower in `vision_config`: "qwen2_vl", "qwen2_5_vl" or "qwen3_vl" (their layouts)
    )
    attention_bias: bool = False  # attention_bias when the config omits it (gpt-oss: True)
    softcapped: bool = False  # final_logit_softcapping when the config omits it (Gemma 2: 30)
    o_bias: bool = True  # attention_bias biases the output projection too (GLM-4.5: q, k and v only)
    qk_norm_whole: bool = False  # the q/k norms span every head's width, not one head's (MiniMax-M2)
    linear: bool = (
        False  # Qwen3-Next: gated-delta-net linear attention in the layers `layer_types` says, gated q elsewhere
    )


FAMILIES: dict[str, Family] = {
    "llama": Family(qkv_bias=False, qk_norm=False, tied_default=False),
    "mistral": Family(qkv_bias=False, qk_norm=False, tied_default=False, windows="all"),
    "qwen2": Family(qkv_bias=True, qk_norm=False, tied_default=False),
    "qwen3": Family(qkv_bias=False, qk_norm=True, tied_default=False),
    "gemma": Family(qkv_bias=False, qk_norm=False, tied_default=True),
    "gemma2": Family(
        qkv_bias=False, qk_norm=False, tied_default=True, norms_per_layer=4, windows="alternate", softcapped=True
    ),
    "gemma3_text": Family(qkv_bias=False, qk_norm=True, tied_default=True, norms_per_layer=4, windows="pattern"),
    "qwen3_moe": Family(qkv_bias=False, qk_norm=True, tied_default=False, moe="qwen3_moe"),
    "qwen2_moe": Family(qkv_bias=True, qk_norm=False, tied_default=False, moe="qwen2_moe"),
    "mixtral": Family(qkv_bias=False, qk_norm=False, tied_default=False, moe="mixtral", windows="all"),
    "gpt_oss": Family(
        qkv_bias=False, qk_norm=False, tied_default=False, moe="gpt_oss", windows="alternate", attention_bias=True
    ),
    "deepseek_v2": Family(qkv_bias=False, qk_norm=False, tied_default=False, moe="deepseek", mla=True),
    "deepseek_v3": Family(qkv_bias=False, qk_norm=False, tied_default=False, moe="deepseek", mla=True),
    "kimi_k2": Family(qkv_bias=False, qk_norm=False, tied_default=False, moe="deepseek", mla=True),
    "qwen2_vl": Family(qkv_bias=True, qk_norm=False, tied_default=False, vision="qwen2_vl"),
    "qwen2_5_vl": Family(qkv_bias=True, qk_norm=False, tied_default=False, vision="qwen2_5_vl"),
    # the language model in `text_config` (Qwen3's q/k norms), a vision tower with learned positions and deepstack mergers
    "qwen3_vl": Family(qkv_bias=False, qk_norm=True, tied_default=False, vision="qwen3_vl"),
    "qwen3_vl_moe": Family(qkv_bias=False, qk_norm=True, tied_default=False, moe="qwen3_moe", vision="qwen3_vl"),
    # GLM-4.5/4.6/4.7: DeepSeek-V3's experts under grouped-query attention with q/k/v biases
    "glm4_moe": Family(qkv_bias=False, qk_norm=False, tied_default=False, moe="deepseek", o_bias=False),
    # MiniMax-M2: Mixtral's experts (sigmoid routing; its bias is a buffer, not a parameter), q/k norms over all heads
    "minimax_m2": Family(qkv_bias=False, qk_norm=False, tied_default=False, moe="mixtral", qk_norm_whole=True),
    # Qwen3-Next: linear attention in three layers of four (no KV), Qwen2-MoE's experts with a shared expert
    "qwen3_next": Family(qkv_bias=False, qk_norm=True, tied_default=False, moe="qwen2_moe", linear=True),
    # GLM-4.7-Flash: DeepSeek-V3's layout (MLA, a shared expert, dense first layers, noaux_tc router bias)
    "glm4_moe_lite": Family(qkv_bias=False, qk_norm=False, tied_default=False, moe="deepseek", mla=True),
}


@dataclass(frozen=True)
class Parameters:
    """Parameter counts by component (the whole model, unsharded)."""

    embeddings: int
    attention: int  # q, k, v, o projections (and their biases, sinks, MLA norms) over all layers
    mlp: int  # dense MLPs over all layers, and the always-active shared experts of MoE layers
    experts: int  # every routed MoE expert over all layers
    router: int  # MoE gates
    norms: int  # layer norms, q/k norms and the final norm
    lm_head: int  # 0 when tied to the embeddings
    vision: int = 0  # a vision-language model's vision tower and its projector

    @property
    def total(self) -> int:
        return (
            self.embeddings
            + self.attention
            + self.mlp
            + self.experts
            + self.router
            + self.norms
            + self.lm_head
            + self.vision
        )


@dataclass(frozen=True)
class Quantization:
    """How a checkpoint packs its linear weights (`quantization_config`): bytes a weight takes with its
    scales and zero points, and which components are packed (the rest stay in the model dtype)."""

    method: str
    bytes_per_weight: float
    components: tuple[str, ...] = QUANTIZED
    hidden_multiple: int = 0  # vLLM pads the experts' hidden size to a multiple of this (MXFP4 kernels)
    shard_multiples: tuple[int, int] = (0, 0)  # ... and a TP shard's expert width to these: (on Hopper, on other GPUs)


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
    intermediate: int  # a dense layer's MLP width (an MoE model's dense layers, if any)
    max_positions: int | None
    weight_dtype: str
    tied_embeddings: bool
    params: Parameters
    experts: int = 0  # routed experts per MoE layer (0: dense)
    experts_per_token: int = 0
    moe_layers: int = 0
    sliding_window: int | None = None  # attention window of the windowed layers
    expert_intermediate: int = 0  # one routed expert's MLP width
    shared_intermediate: int = 0  # the shared experts' MLP width a token always passes through
    sliding_layers: int = 0  # layers whose KV is bounded by `sliding_window` (the rest attend in full)
    kv_latent: int = 0  # MLA: the cached latent per token and layer (kv_lora_rank + qk_rope_head_dim)
    logit_softcapping: bool = False  # Gemma 2: tanh-capped logits (one more vocabulary-wide tensor)
    qk_norm: bool = False  # q and k normed per head (their saved activations in training)
    linear_layers: int = 0  # linear-attention layers: no KV cache, a fixed state per sequence instead
    linear_state: int = 0  # that state's elements per sequence over all of them (conv and recurrent state)

    @property
    def attention_layers(self) -> int:
        """The layers that hold a KV cache (all but the linear-attention ones)."""
        return self.layers - self.linear_layers

    quantization: Quantization | None = None

    @property
    def active_params(self) -> int:
        """Parameters one token passes through (all of them for a dense model)."""
        if not self.experts:
            return self.params.total
        return self.params.total - self.params.experts + self.params.experts * self.experts_per_token // self.experts

    @property
    def mlp_width(self) -> int:
        """The widest MLP a token passes through in one layer: routed experts x their width plus the
        shared experts in an MoE layer, the dense width elsewhere."""
        moe = self.experts_per_token * self.expert_intermediate + self.shared_intermediate if self.experts else 0
        return max(moe, self.intermediate if self.layers > self.moe_layers else 0)

    def layer_params(self) -> int:
        """The largest transformer layer's parameters (what FSDP gathers at once)."""
        return max((size for _, size in self.layer_runs()), default=0)

    def layer_runs(self) -> tuple[tuple[int, int], ...]:
        """The transformer layers in order as runs of (layers, parameters of each): an MoE model's dense
        layers first (DeepSeek's `first_k_dense_replace`; an interleaving such as `moe_layer_freq` is
        taken as leading too), then its MoE layers."""
        per_layer = (self.params.attention + self.params.norms - self.hidden) // self.layers
        dense = per_layer + 3 * self.hidden * self.intermediate
        moe = (self.params.experts + self.params.router) // self.moe_layers if self.moe_layers else 0
        routed = per_layer + moe + 3 * self.hidden * self.shared_intermediate
        runs = ((self.layers - self.moe_layers, dense), (self.moe_layers, routed))
        return tuple((count, size) for count, size in runs if count > 0)

    def stored_bytes(self, dtype_bytes: int, expert_shards: int = 1, *, hopper: bool = True) -> tuple[int, int]:
        """Bytes the weights take loaded (the non-expert part, the routed experts over all of their
        `expert_shards` TP ranks), packed as the checkpoint's quantization says and the rest in the
        engine's `dtype_bytes`; with the padding vLLM's kernels for that packing add on `hopper` or not."""
        q = self.quantization
        p = self.params

        def size(component: str, count: int) -> float:
            return count * (q.bytes_per_weight if q is not None and component in q.components else dtype_bytes)

        rest = p.embeddings + p.router + p.norms + p.lm_head + p.vision
        dense = size("attention", p.attention) + size("mlp", p.mlp) + rest * dtype_bytes
        if q is None or not self.expert_intermediate:
            return int(dense), int(size("experts", p.experts))
        width = -(-self.expert_intermediate // expert_shards)
        return int(dense), int(
            size("experts", p.experts)
            * _padded(self.hidden, q.hidden_multiple)
            * _padded(width, q.shard_multiples[0 if hopper else 1])
        )


def _padded(size: int, multiple: int) -> float:
    """How much larger `size` is rounded up to a multiple of `multiple` (1 for none)."""
    return -(-size // multiple) * multiple / size if multiple else 1.0


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
    text = config.get("text_config")
    if isinstance(text, Mapping) and family.vision:  # Qwen3-VL: the language model's keys in `text_config`
        tied = {k: v for k in ("tie_word_embeddings",) if (v := config.get(k, text.get(k))) is not None}
        config = {**config, **text, "model_type": model_type, **tied}
    try:
        quantization = _quantization(config.get("quantization_config"))
        if isinstance(quantization, str):
            return Unsized(model_type, quantization)
        return _sized(config, family, quantization)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as exc:
        return Unsized(model_type, f"config.json lacks a usable {exc}")


def _quantization(q: Any) -> Quantization | str | None:
    """The packing of a `quantization_config`, or why it cannot be sized."""
    if not q:
        return None
    method = str(q.get("quant_method", "")).lower()
    if method == "fp8":  # per-tensor, or fp32 scales per weight_block_size block (DeepSeek-V3, Qwen3-FP8)
        block = q.get("weight_block_size")
        return Quantization("fp8", 1 + (4 / (block[0] * block[1]) if block else 0))
    if method == "mxfp4":  # gpt-oss: 4-bit values and one 8-bit scale per 32, experts only; vLLM's kernels pad
        # a shard's expert width to 64 (Triton, Hopper) or 128 (Marlin before Hopper) (quantization/mxfp4.py)
        return Quantization("mxfp4", 4.25 / 8, ("experts",), hidden_multiple=256, shard_multiples=(64, 128))
    if method in ("awq", "gptq"):  # packed ints, fp16 scales and packed zeros per group
        bits = _int(q, "bits", q.get("w_bit", 4))
        group = int(q.get("group_size", q.get("q_group_size")) or 128)
        per_group = (2 + bits / 8) / group if group > 0 else 0
        return Quantization(method, bits / 8 + per_group)
    if method == "compressed-tensors":
        groups = q.get("config_groups") or {}
        first: Mapping[str, Any] = next(iter(groups.values()), {})
        weights = first.get("weights") or {}
        bits = _int(weights, "num_bits")
        strategy = str(weights.get("strategy", "tensor"))
        group = int(weights.get("group_size") or 0)
        block = weights.get("block_structure")
        scale = 2 / group if strategy == "group" and group > 0 else 4 / (block[0] * block[1]) if block else 0
        return Quantization(f"compressed-tensors {weights.get('type', 'int')}{bits} {strategy}", bits / 8 + scale)
    return f"quant_method {method!r} is not one of ['awq', 'compressed-tensors', 'fp8', 'gptq', 'mxfp4']"


def _int(config: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if value is None or isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{key}={value!r}")
    return value


def _attention(config: Mapping[str, Any], family: Family, hidden: int, heads: int, kv: int, head_dim: int) -> int:
    """One layer's attention parameters."""
    if family.mla:
        rope, nope, v = _int(config, "qk_rope_head_dim"), _int(config, "qk_nope_head_dim"), _int(config, "v_head_dim")
        kv_rank, q_rank = _int(config, "kv_lora_rank"), config.get("q_lora_rank")
        q = hidden * q_rank + q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        return q + hidden * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v) + heads * v * hidden
    q_width, kv_width = heads * head_dim, kv * head_dim
    params = hidden * q_width + 2 * hidden * kv_width + q_width * hidden
    if family.qkv_bias or config.get("attention_bias", family.attention_bias):  # Qwen2: q/k/v; attention_bias: o too
        params += q_width + 2 * kv_width + (hidden if family.o_bias and not family.qkv_bias else 0)
    return params + (heads if family.moe == "gpt_oss" else 0)  # gpt-oss: one attention sink per head


def _moe(config: Mapping[str, Any], family: Family, layers: int, hidden: int) -> tuple[int, int, int, int, int, int]:
    """Routed experts per layer, experts per token, MoE layers, one expert's width, the shared experts'
    width, and the router's parameters per MoE layer."""
    kind = family.moe
    if kind in ("mixtral", "gpt_oss"):
        experts = _int(config, "num_local_experts")
        per_token = _int(config, "num_experts_per_tok", config.get("experts_per_token"))
        return (
            experts,
            per_token,
            layers,
            _int(config, "intermediate_size"),
            0,
            hidden * experts + (experts if kind == "gpt_oss" else 0),
        )
    if kind == "deepseek":
        experts, per_token = _int(config, "n_routed_experts"), _int(config, "num_experts_per_tok")
        first_dense = int(config.get("first_k_dense_replace") or 0)
        freq = _int(config, "moe_layer_freq", 1)
        moe_layers = max(0, (layers - 1) // freq - (first_dense - 1) // freq)  # i >= first_dense, i % freq == 0
        width = _int(config, "moe_intermediate_size")
        shared = int(config.get("n_shared_experts") or 0) * width
        bias = experts if config.get("topk_method") == "noaux_tc" else 0  # e_score_correction_bias
        return experts, per_token, moe_layers, width, shared, hidden * experts + bias
    experts, per_token = _int(config, "num_experts"), _int(config, "num_experts_per_tok")
    step = _int(config, "decoder_sparse_step", 1)
    dense_only = {i for i in config.get("mlp_only_layers") or () if isinstance(i, int) and 0 <= i < layers}
    moe_layers = layers // step - sum(1 for i in dense_only if (i + 1) % step == 0)
    shared = int(config.get("shared_expert_intermediate_size") or 0) if kind == "qwen2_moe" else 0
    router = hidden * experts + (hidden if kind == "qwen2_moe" else 0)  # Qwen2-MoE: the shared expert's sigmoid gate
    return experts, per_token, moe_layers, _int(config, "moe_intermediate_size"), shared, router


def _windows(config: Mapping[str, Any], family: Family, layers: int) -> tuple[int | None, int]:
    """The sliding window and how many layers use it."""
    window = config.get("sliding_window")
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
        return None, 0
    types = config.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        return window, sum(1 for t in types if t == "sliding_attention")
    if family.windows == "all" or config.get("use_sliding_window"):
        return window, layers
    if family.windows == "alternate":  # Gemma 2, gpt-oss: even layers slide
        return window, (layers + 1) // 2
    if family.windows == "pattern":  # Gemma 3: every `sliding_window_pattern`-th layer attends in full
        pattern = _int(config, "sliding_window_pattern", 6)
        return window, layers - layers // pattern
    return None, 0


@dataclass(frozen=True)
class _Linear:
    """Gated-delta-net linear attention: how many layers, and per layer its weights, its gated norm and
    the state one sequence keeps (elements)."""

    layers: int = 0
    params: int = 0
    norm: int = 0
    state: int = 0


def _linear(config: Mapping[str, Any], layers: int, hidden: int) -> _Linear:
    """Qwen3-Next's linear-attention layers (`layer_types`, else every layer but each
    `full_attention_interval`-th): q, k, v, z in one projection, the b and a gates, a depthwise
    convolution over q, k and v, dt_bias and A_log per value head, a gated norm of a value head's
    width and the output projection; a sequence keeps the convolution's last `kernel - 1` inputs and
    one k x v state per value head."""
    types = config.get("layer_types")
    if isinstance(types, list) and len(types) == layers:
        count = sum(1 for t in types if t == "linear_attention")
    else:
        interval = _int(config, "full_attention_interval", 4)
        count = layers - layers // interval
    k_heads, v_heads = _int(config, "linear_num_key_heads"), _int(config, "linear_num_value_heads")
    k_dim, v_dim = _int(config, "linear_key_head_dim"), _int(config, "linear_value_head_dim")
    kernel = _int(config, "linear_conv_kernel_dim", 4)
    keys, values = k_heads * k_dim, v_heads * v_dim
    conv = 2 * keys + values
    params = hidden * (2 * keys + 2 * values) + hidden * 2 * v_heads + conv * kernel + 2 * v_heads + values * hidden
    return _Linear(count, params, v_dim, conv * (kernel - 1) + v_heads * k_dim * v_dim)


def _vision(v: Mapping[str, Any], kind: str) -> int:
    """A vision tower: patch embedding, blocks and the patch merger. Qwen2-VL: `embed_dim` wide, a
    plain MLP of `mlp_ratio`, LayerNorms (weight and bias); Qwen2.5-VL: `hidden_size` wide, a gated
    MLP of `intermediate_size`, RMSNorms (weight only); Qwen3-VL: Qwen2-VL's blocks `hidden_size` wide
    with a plain MLP of `intermediate_size`, a patch embedding with a bias, learned positions
    (`num_position_embeddings`) and one more merger, normed after the merge, per deepstack layer."""
    qwen2, qwen3 = kind == "qwen2_vl", kind == "qwen3_vl"
    hidden = _int(v, "embed_dim") if qwen2 else _int(v, "hidden_size")
    depth = _int(v, "depth")
    width = int(v.get("mlp_ratio", 4) * hidden) if qwen2 else _int(v, "intermediate_size")
    gated = kind == "qwen2_5_vl"
    norm = hidden if gated else 2 * hidden
    patch = (
        _int(v, "in_channels", v.get("in_chans", 3))
        * _int(v, "temporal_patch_size", 2)
        * _int(v, "patch_size", 14) ** 2
        * hidden
    ) + (hidden if qwen3 else 0)
    mlp = 3 * hidden * width + 2 * width + hidden if gated else 2 * hidden * width + width + hidden
    block = 2 * norm + 3 * hidden * hidden + 3 * hidden + hidden * hidden + hidden + mlp
    merged = hidden * _int(v, "spatial_merge_size", 2) ** 2
    out = _int(v, "hidden_size") if qwen2 else _int(v, "out_hidden_size")  # the language model's width
    merger = merged * merged + merged + merged * out + out
    if not qwen3:
        return patch + depth * block + norm + merger
    positions = _int(v, "num_position_embeddings") * hidden
    deepstack = len(v.get("deepstack_visual_indexes") or ()) * (2 * merged + merger)
    return patch + positions + depth * block + norm + merger + deepstack


def _sized(config: Mapping[str, Any], family: Family, quantization: Quantization | None) -> Architecture:
    layers, hidden, heads = (
        _int(config, "num_hidden_layers"),
        _int(config, "hidden_size"),
        _int(config, "num_attention_heads"),
    )
    kv_heads = _int(config, "num_key_value_heads", heads)
    head_dim = _int(config, "head_dim") if config.get("head_dim") is not None else hidden // heads
    vocab = _int(config, "vocab_size")
    tied = bool(config.get("tie_word_embeddings", family.tied_default))
    attention = _attention(config, family, hidden, heads, kv_heads, head_dim)
    qk_norm = family.qk_norm or bool(config.get("use_qk_norm"))
    qk_width = (heads + kv_heads) * head_dim if family.qk_norm_whole else 2 * head_dim
    norms = family.norms_per_layer * hidden + (qk_width if qk_norm else 0)
    linear = _linear(config, layers, hidden) if family.linear else _Linear()
    if family.linear:  # q_proj also yields the output gate; linear layers have their own weights and one norm
        attention += heads * head_dim * hidden
    full = layers - linear.layers
    experts = experts_per_token = moe_layers = width = shared = router = 0
    if family.moe:
        experts, experts_per_token, moe_layers, width, shared, router = _moe(config, family, layers, hidden)
    dense_layers = layers - moe_layers
    intermediate = _int(config, "intermediate_size") if dense_layers else 0  # gpt-oss: every layer is MoE
    mlp = dense_layers * 3 * hidden * intermediate + moe_layers * 3 * hidden * shared
    if config.get("mlp_bias"):
        mlp += dense_layers * (2 * intermediate + hidden)
    expert_params = moe_layers * experts * 3 * hidden * width
    if family.moe == "gpt_oss":  # gate_up and down projections carry biases
        expert_params += moe_layers * experts * (2 * width + hidden)
    kv_latent = _int(config, "kv_lora_rank") + _int(config, "qk_rope_head_dim") if family.mla else 0
    window, sliding = _windows(config, family, layers)
    params = Parameters(
        embeddings=vocab * hidden,
        attention=full * attention + linear.layers * linear.params,
        mlp=mlp,
        experts=expert_params,
        router=moe_layers * router,
        norms=full * norms + linear.layers * (family.norms_per_layer * hidden + linear.norm) + hidden,
        lm_head=0 if tied else vocab * hidden,
        vision=_vision(config["vision_config"], family.vision) if family.vision else 0,
    )
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
    max_positions = config.get("max_position_embeddings")
    return Architecture(
        model_type=str(config["model_type"]),
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=1 if family.mla else kv_heads,
        head_dim=head_dim,
        vocab=vocab,
        intermediate=intermediate,
        max_positions=max_positions if isinstance(max_positions, int) else None,
        weight_dtype=dtype,
        tied_embeddings=tied,
        params=params,
        experts=experts,
        experts_per_token=experts_per_token,
        moe_layers=moe_layers,
        sliding_window=window,
        expert_intermediate=width,
        shared_intermediate=shared,
        sliding_layers=sliding,
        kv_latent=kv_latent,
        logit_softcapping=bool(config.get("final_logit_softcapping", family.softcapped)),
        qk_norm=qk_norm,
        linear_layers=linear.layers,
        linear_state=linear.layers * linear.state,
        quantization=quantization,
    )
