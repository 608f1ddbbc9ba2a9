"""The rollout engine's memory (vLLM): its weights per shard, its utilization budget, the
profiling peak and the KV cache that is left, with vLLM's own arithmetic (see the package's
docstring).

What vLLM subtracts from `gpu_memory_utilization x total` before it sizes the KV cache, term by term
(V0: vllm/worker/worker.py `determine_num_available_blocks`; V1: vllm/v1/worker/gpu_worker.py
`determine_available_memory` over `memory_profiling`, with gpu_model_runner.py `profile_run`), each
held to the public start-up logs of tests/rules/test_vllm_startup.py:

* the loaded weights (`engine_weights`, "Model loading took X GiB");
* the torch peak of the profiling run beyond them: the larger of the forward over
  `max_num_batched_tokens` (`forward_peak`) and, in V1, the sampler's warm-up over `max_num_seqs`
  rows of the vocabulary (`sampler_peak`, `_dummy_sampler_run`), which runs after the forward's
  activations are freed, on the last pipeline stage alone (`stage_sampler_rows`); V0's profiling run
  shows no sampler peak (vllm-project/vllm#10517: 15.05 GiB peak over 14.99 GiB of weights with 256
  sequences of a 128k vocabulary);
* the memory outside torch's allocator that grew since the worker started (`non_torch`: cuBLAS
  workspaces, NCCL and custom all-reduce buffers with TP);
* CUDA graphs, only where the release estimates them before it sizes the KV cache (`VllmRelease`):
  before 0.21 vLLM captures them after the KV cache is allocated, out of the utilization budget's
  margin (the 0.10.1.1 logs print "Graph capturing finished ... took 0.50 GiB" after "Available KV
  cache memory"); since 0.21 it profiles them first and subtracts them (noonghunna/club-3090#127:
  "CUDA graph memory profiling is enabled (default since v0.21.0)").

The sampler of the locked release (0.30.0, `LOCKED_VLLM`) is FlashInfer's. vllm-project/vllm#40376
("Enable FlashInfer top-k/top-p sampler by default", merged before vllm-project/vllm#42472 of
2026-05-13, which builds on it) turned `VLLM_USE_FLASHINFER_SAMPLER` from opt-in (since
vllm-project/vllm#26859 of 2025-10) to on unless set to 0 (vllm/envs.py: "Enabled by default when the
hardware supports it"). vllm/v1/sample/ops/topk_topp_sampler.py (`TopKTopPSampler.__init__`,
`flashinfer_sampler_supported`; vllm-project/vllm snapshot 01fa3fe) then uses it on CUDA unless the
variable is 0, FlashInfer is missing (the runtimes lock flashinfer-python), the GPU's compute
capability is not FlashInfer's, the GPU has 16 SMs or fewer, FlashInfer's JIT cannot build its
sampling kernel, or `logprobs_mode` asks for processed logprobs (`engine_release`). The warm-up
passes top-k and top-p with no per-request generators (gpu_model_runner.py `_dummy_sampler_run`), so
`forward_cuda` reaches FlashInfer's kernel. SkyRL 0.4.0 never sets `VLLM_USE_FLASHINFER_SAMPLER` (its
inference servers set other VLLM_* variables only), and asks for processed logprobs only with
`generator.inference_engine.enable_return_sample_support_set`. The PyTorch fallback's ten rows are
0.10.1.1's sort (tests/rules/test_vllm_startup.py); 0.30.0's native path filters with Triton from 8
rows on, unmeasured here, so ten rows stay its conservative estimate."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch.launch_config.geometry import Geometry
from rlaunch.launch_config.recipe_keys import ENGINE
from rlaunch.rules.devices import GIB, Device
from rlaunch.rules.memory.rows import Keys, Row, gib, max_model_len
from rlaunch.rules.model_shape import DTYPE_BYTES, Architecture, Quantization

VLLM_BLOCK = 16  # tokens per KV block (vLLM's default block size)
FLASHMLA_BLOCK = 64  # vLLM forces it for MLA on Hopper (platforms/cuda.py: FlashMLA, the default MLA backend there)
CUDA_GRAPHS = int(0.5 * GIB)  # captured graphs, not in eager mode (the 0.10.1.1 logs: "took 0.50 GiB" at TP1)
NON_TORCH = int(0.3 * GIB)  # memory outside torch grown by profiling, one device (#10517 logs 0.35 GiB)
NON_TORCH_TP = int(0.4 * GIB)  # ... with TP, NCCL and custom all-reduce buffers as well (#13061 logs 0.25 GiB + graphs)
SAMPLER_ROWS = 10  # vocabulary-wide fp32 rows per sequence at the PyTorch top-k/top-p sampler's warm-up peak
FLASHINFER_SAMPLER_ROWS = 2  # ... with FlashInfer's sampler: the fp32 logits and their probabilities
# `engine_init_kwargs.quantization` values with which vLLM quantizes an unquantized checkpoint as it
# loads it (per-tensor or per-channel fp8 scales, a few bytes a matrix): the linear layers' weights
# (or the experts' alone) take one byte each; embeddings, LM head, norms and router stay in the dtype.
# vLLM creates them on `meta` and quantizes each as it streams in (vllm-project/vllm#31914), so loading
# never holds the checkpoint's bf16 copy either.
ONLINE_QUANTIZATION = {
    "fp8": Quantization("fp8 (online)", 1.0),
    "ptpc_fp8": Quantization("ptpc_fp8 (online)", 1.0),
    "experts_int8": Quantization("experts_int8 (online)", 1.0, ("experts",)),
}


@dataclass(frozen=True)
class VllmRelease:
    """What of vLLM's start-up arithmetic depends on the release (and the sampler it runs): whether
    it warms the sampler up while profiling (V1) and with which kernel, and whether it subtracts CUDA
    graphs before sizing the KV cache (V1 from 0.21)."""

    version: str
    sampler_warmup: bool = True
    flashinfer_sampler: bool = False  # V1 logs "Using FlashInfer for top-p & top-k sampling"
    graphs_in_budget: bool = True

    @property
    def sampler_rows(self) -> int:
        if not self.sampler_warmup:
            return 0
        return FLASHINFER_SAMPLER_ROWS if self.flashinfer_sampler else SAMPLER_ROWS


# The release the SkyRL runtimes lock (runtimes/fsdp and megatron lock.txt: vllm==0.30.0, with
# flashinfer-python==0.6.18.post1): CUDA graphs profiled into the budget, and FlashInfer's sampler (see
# the module docstring for where vLLM picks it and where it does not).
LOCKED_VLLM = VllmRelease("0.30.0", flashinfer_sampler=True)
# vLLM's PROCESSED_LOGPROBS_MODES: logprobs after top-k/top-p, which FlashInfer's kernel does not return
PROCESSED_LOGPROBS = ("processed_logits", "processed_logprobs")


@dataclass(frozen=True)
class KvCapacity:
    """What a rollout engine's KV budget holds, on one of its devices."""

    device: int  # the device's capacity
    budget: int  # gpu_memory_utilization x capacity
    weights: int  # per device
    overhead: int  # estimated profiling peak + graphs + non-torch
    bytes_per_token: int  # per device, every layer as if it attended in full
    max_model_len: int
    window: int | None = None  # sliding-window attention: a sequence never holds more KV than this
    sliding_layers: int = 0  # of `layers`, those bounded by `window` (all of them when 0 and a window is set)
    layers: int = 0  # KV layers on one device (0: not split, the uniform arithmetic)
    batched_tokens: int = 8192  # max_num_batched_tokens: a windowed layer also holds the chunk being prefilled
    block: int = VLLM_BLOCK  # tokens per KV page (`kv_block_size`)
    weights_how: str = ""  # what the engine's settings changed of its weights (online quantization, CPU offload)
    unsized: str = ""  # an engine setting the weights could not be sized with (they are sized without it)

    @property
    def groups(self) -> KvGroups:
        return kv_groups(self.layers, self.sliding_layers if self.window else 0)

    @property
    def blocks(self) -> int:
        """vLLM's "# GPU blocks": pages of `block` tokens, one per layer of a group."""
        g = self.groups
        per_layer = self.bytes_per_token // max(1, self.layers or 1)
        if self.available <= 0 or per_layer <= 0:
            return 0
        return self.available // (per_layer * self.block * (g.size if self.layers else 1))

    @property
    def blocks_per_sequence(self) -> int:
        """Blocks one maximum-length sequence takes (vLLM's `max_memory_usage_bytes` per group)."""
        g = self.groups
        full = -(-self.max_model_len // self.block)
        windowed = min((self.window or 0) - 1 + self.batched_tokens, self.max_model_len)
        return g.full * full + g.sliding * (-(-windowed // self.block) + 1)

    @property
    def one_sequence(self) -> int:
        """KV bytes one maximum-length sequence needs on one device."""
        if not self.layers:
            return self.bytes_per_token * min(self.max_model_len, self.window or self.max_model_len)
        return self.blocks_per_sequence * self.block * (self.bytes_per_token // self.layers) * self.groups.size

    @property
    def upper(self) -> int:
        """KV bytes left with no overhead at all: what the engine can never exceed."""
        return self.budget - self.weights

    @property
    def available(self) -> int:
        return self.budget - self.weights - self.overhead

    @property
    def tokens(self) -> int:
        """vLLM's "GPU KV cache size: N tokens": the blocks of one group."""
        if not self.layers:
            return kv_tokens(self.available, self.bytes_per_token, self.block)
        return self.blocks // self.groups.count * self.block

    @property
    def sequences(self) -> float:
        """vLLM's "Maximum concurrency for `max_model_len` tokens per request"."""
        if not self.layers:
            return self.tokens / self.max_model_len if self.max_model_len else 0.0
        return self.blocks / max(1, self.blocks_per_sequence)


@dataclass(frozen=True)
class KvGroups:
    """vLLM's hybrid KV cache groups: layers of one attention kind are split into groups of `size`
    layers that share one pool of pages (padded where a kind has fewer)."""

    size: int
    full: int  # groups of full-attention layers
    sliding: int  # groups of sliding-window layers

    @property
    def count(self) -> int:
        return self.full + self.sliding


def kv_groups(layers: int, sliding: int) -> KvGroups:
    """How vLLM (V1, `_get_kv_cache_config_uniform_page_size`) groups `layers`, `sliding` of them
    windowed: one group of every layer when all are of one kind, else groups as large as the smaller
    kind (the larger kind's own count when it is within 25 % of it)."""
    full = layers - sliding
    if not full or not sliding:
        return KvGroups(max(1, layers), 1 if full else 0, 1 if sliding else 0)
    small, large = min(full, sliding), max(full, sliding)
    size = large if large < small * 1.25 else small
    return KvGroups(size, -(-full // size), -(-sliding // size))


def kv_tokens(available: int, bytes_per_token: int, block: int = VLLM_BLOCK) -> int:
    """Tokens vLLM's KV cache holds in `available` bytes: whole blocks of `block` tokens."""
    if available <= 0 or bytes_per_token <= 0:
        return 0
    return available // (bytes_per_token * block) * block


def kv_bytes_per_token(arch: Architecture, tp: int = 1, pp: int = 1, dtype_bytes: int = 2) -> int:
    """K and V of one token on one device of a TP x PP engine (a KV head is never split: TP beyond
    the KV heads replicates them; MLA's latent is one head, replicated on every TP rank)."""
    if arch.kv_latent:
        return math.ceil(arch.layers / pp) * arch.kv_latent * dtype_bytes
    return 2 * math.ceil(arch.attention_layers / pp) * math.ceil(arch.kv_heads / tp) * arch.head_dim * dtype_bytes


def max_concurrency(tokens: int, max_model_len: int) -> float:
    """vLLM's "Maximum concurrency for N tokens per request" (full attention)."""
    return tokens / max_model_len


def rollout_rows(kv: KvCapacity, geo: Geometry) -> list[Row]:
    """A rollout engine device's rows: weights against the budget, one sequence's KV against what the
    weights leave, and the budget against the device."""
    one = kv.one_sequence
    return [
        Row(
            "rollout",
            "engine weights",
            kv.weights,
            kv.budget,
            kv.weights,
            f"per TP{geo.tp} x PP{geo.pp} shard{kv.weights_how}, against the utilization budget",
            margin=0.0,  # exact: what the checkpoint holds, not an estimate
        ),
        Row(
            "rollout",
            "KV of one sequence",
            one + kv.overhead,
            max(0, kv.upper),
            one,
            f"{kv.max_model_len} tokens x {kv.bytes_per_token} B + ~{gib(kv.overhead)} GiB profiling peak, "
            "against the budget left after the weights",
        ),
        Row(
            "rollout",
            "generation",
            kv.budget,
            kv.device,
            0,
            f"gpu_memory_utilization budget: weights {gib(kv.weights)} + overhead ~{gib(kv.overhead)} + KV ~{gib(max(0, kv.available))} GiB "
            f"= ~{kv.tokens} tokens, ~{kv.sequences:.1f} x {kv.max_model_len}-token sequences",
            margin=0.0,
        ),
    ]


def engine_kv(
    arch: Architecture, geo: Geometry, composed: Mapping[str, Any], dev: Device, release: VllmRelease = LOCKED_VLLM
) -> KvCapacity:
    """One rollout engine device of `release`: its utilization budget, weights, estimated overhead
    (the module docstring's terms) and the KV cache that is left."""
    k = Keys(composed)
    release = engine_release(release, k)
    seq = max_model_len(composed)
    tp, pp, dp, ep = geo.tp, geo.pp, geo.dp, geo.ep
    wbytes = DTYPE_BYTES.get(str(k(ENGINE.MODEL_DTYPE, "bfloat16")), 2)
    loaded = engine_weights(arch, k)
    expert_shard = tp * dp if ep > 1 else tp
    widths = 1 if ep > 1 else tp  # expert parallelism keeps whole experts, TP splits each one's width
    dense, experts = loaded.arch.stored_bytes(wbytes, widths, hopper=dev.sm == 90)  # packed as vLLM loads them
    weights = max(0, int((dense / tp + experts / expert_shard) / pp) - loaded.offloaded)
    util = float(k(ENGINE.GPU_MEMORY_UTILIZATION, 0.9))
    batched = int(k(ENGINE.MAX_NUM_BATCHED_TOKENS, 8192))
    seqs = int(k(ENGINE.MAX_NUM_SEQS, 256))
    eager = bool(k(ENGINE.ENFORCE_EAGER, False))
    graphs = CUDA_GRAPHS if release.graphs_in_budget and not eager else 0
    capacity = kv_capacity(
        arch,
        tp,
        pp,
        kv_cache_bytes(k, wbytes),
        max_model_len=seq,
        batched_tokens=batched,
        block=kv_block_size(arch, dev),
        device=dev.bytes,
        budget=int(util * dev.bytes),
        weights=weights,
        overhead=profile_peak(arch, tp, batched, seqs, stage_sampler_rows(release, arch.layers, pp))
        + non_torch(tp)
        + graphs,
    )
    state = (
        f"the {arch.linear_layers} linear-attention layers' state, {gib(arch.linear_state * kv_cache_bytes(k, wbytes))} "
        "GiB a sequence in vLLM's KV pool, is not sized: the KV cache counts the full-attention layers alone"
        if arch.linear_layers
        else ""
    )
    unsized = "; ".join(note for note in (loaded.unsized, state) if note)
    return dataclasses.replace(capacity, weights_how=loaded.how, unsized=unsized)


def engine_release(release: VllmRelease, k: Keys) -> VllmRelease:
    """`release` as the engine's settings run its sampler: FlashInfer's kernel cannot return processed
    logprobs, so vLLM samples with PyTorch's where `logprobs_mode` asks for them (TopKTopPSampler).
    SkyRL's `enable_return_sample_support_set` passes `logprobs_mode=processed_logprobs`, and
    `engine_init_kwargs` are applied after it (skyrl inference_servers/utils.py `build_vllm_cli_args`)."""
    asked = "processed_logprobs" if k(ENGINE.RETURN_SAMPLE_SUPPORT_SET, False) else "raw_logprobs"
    mode = str(k(ENGINE.LOGPROBS_MODE, asked))
    if release.flashinfer_sampler and mode in PROCESSED_LOGPROBS:
        return dataclasses.replace(release, flashinfer_sampler=False)
    return release


@dataclass(frozen=True)
class EngineWeights:
    """The engine's weights as its settings load them: the architecture with the packing vLLM applies
    online, the bytes each device offloads to the CPU, how (for the weights row) and what was not sized."""

    arch: Architecture
    offloaded: int = 0
    how: str = ""
    unsized: str = ""


def engine_weights(arch: Architecture, k: Keys) -> EngineWeights:
    """What `engine_init_kwargs` change of the weights on one engine device: `quantization` of an
    unquantized checkpoint (`ONLINE_QUANTIZATION`; a quantized checkpoint is loaded as it is packed,
    whatever the setting names), and `cpu_offload_gb`, the GiB of weights each device leaves in CPU
    memory (vLLM streams them in for every forward)."""
    method = str(k(ENGINE.QUANTIZATION, "") or "").lower()
    online = ONLINE_QUANTIZATION.get(method) if arch.quantization is None else None
    offload_gb = float(k(ENGINE.CPU_OFFLOAD_GB, 0) or 0)
    offloaded = int(offload_gb * GIB) if offload_gb > 0 else 0
    how = (f", {online.method}" if online else "") + (f", {offload_gb:g} GiB offloaded to the CPU" if offloaded else "")
    unsized = ""
    if method and arch.quantization is None and online is None:
        unsized = (
            f"engine_init_kwargs.quantization={method!r} is not sized (online: {', '.join(ONLINE_QUANTIZATION)}): "
            f"the engine's weights are sized unquantized, in the model dtype"
        )
    return EngineWeights(dataclasses.replace(arch, quantization=online) if online else arch, offloaded, how, unsized)


def kv_capacity(
    arch: Architecture,
    tp: int,
    pp: int,
    dtype_bytes: int,
    *,
    max_model_len: int,
    batched_tokens: int,
    block: int = VLLM_BLOCK,
    device: int,
    budget: int,
    weights: int = 0,
    overhead: int = 0,
) -> KvCapacity:
    """The KV cache of one device of a TP x PP engine around its budget: the layers of its pipeline
    stage (the first stages take the extra layer, so the most), their sliding windows, and the page
    size. A published start-up log's "Available KV cache memory" is `budget` with nothing else."""
    return KvCapacity(
        device=device,
        budget=budget,
        weights=weights,
        overhead=overhead,
        bytes_per_token=kv_bytes_per_token(arch, tp, pp, dtype_bytes),
        max_model_len=max_model_len,
        window=arch.sliding_window,
        sliding_layers=math.ceil(arch.sliding_layers / pp),
        layers=math.ceil(arch.attention_layers / pp),
        batched_tokens=batched_tokens,
        block=block,
    )


def kv_block_size(arch: Architecture, dev: Device) -> int:
    """Tokens per KV page: vLLM's 16, except multi-head latent attention on Hopper, whose default
    backend (FlashMLA) needs pages of 64 and vLLM raises the block size to it."""
    return FLASHMLA_BLOCK if arch.kv_latent and dev.sm == 90 else VLLM_BLOCK


def profile_peak(arch: Architecture, tp: int, batched: int, seqs: int, sampler_rows: int = SAMPLER_ROWS) -> int:
    """What vLLM's profiling run peaks at beyond the weights: the larger of its forward and its
    sampler's warm-up, which runs after the forward's activations are freed."""
    return max(forward_peak(arch, tp, batched), sampler_peak(arch, seqs, sampler_rows))


def stage_sampler_rows(release: VllmRelease, layers: int, pp: int) -> int:
    """The sampler rows on the stage that sizes the KV cache. Only the last pipeline stage samples
    (gpu_model_runner.py `profile_run`: the sampler warm-up runs under `get_pp_group().is_last_rank`),
    and vLLM never gives it one of the layers that do not divide evenly (distributed/utils.py
    `get_pp_indices` adds them from the second-to-last stage back). Where they divide, the last stage
    holds as many layers as any and the sampler besides: it sizes the engine. Where they do not, the
    fullest stage (whose layers `kv_capacity` sizes) warms no sampler up: vllm-project/vllm#20665's
    DeepSeek-V2-Lite at TP2 x PP2 logs 12.13 GiB on the first stage's 14 layers and 11.33 GiB on the
    last stage's 13, and the first stage's fewer blocks a layer size the engine. (The last stage, a
    layer short and sampling, is taken not to bind, as there; a sampler larger than a layer's KV
    share could make it bind, which this does not compare.)"""
    return release.sampler_rows if pp == 1 or layers % pp == 0 else 0


def forward_peak(arch: Architecture, tp: int, batched: int) -> int:
    """The profiling forward over `max_num_batched_tokens` (bf16): the MLP's gate/up and activation
    over TP, the attention's q, k and v over TP, and two hidden-wide buffers (the residual stream and
    the layer's output). vllm-project/vllm#10517 logs 2.07 and 2.99 GiB at 20,000 and 29,000 tokens of
    Llama-3.1-8B (this: 2.14 and 3.10)."""
    qkv = (arch.heads + 2 * arch.kv_heads) * arch.head_dim
    return batched * 2 * ((3 * arch.mlp_width + qkv) // max(1, tp) + 2 * arch.hidden)


def sampler_peak(arch: Architecture, seqs: int, rows: int = SAMPLER_ROWS) -> int:
    """V1's sampler warm-up (`_dummy_sampler_run`): `rows` fp32 tensors of `max_num_seqs` x the
    vocabulary, gathered (not sharded over TP). The PyTorch top-k/top-p path sorts the logits (values
    and int64 indices), takes their softmax and cumulative sum and scatters them back: ten rows fit
    the 0.10.1.1 log without FlashInfer (tests/rules/test_vllm_startup.py); FlashInfer's keeps two."""
    return seqs * arch.vocab * 4 * rows


def non_torch(tp: int) -> int:
    """Memory outside torch's allocator that profiling grew: more with TP (NCCL, custom all-reduce)."""
    return NON_TORCH_TP if tp > 1 else NON_TORCH


def kv_cache_bytes(k: Keys, model_bytes: int) -> int:
    """Bytes a KV element takes: vLLM's `kv_cache_dtype`, whose `auto` is the model's activation dtype
    (`model_dtype`), whatever the checkpoint's weights are packed in; fp8* halves it."""
    kv_dtype = str(k(ENGINE.KV_CACHE_DTYPE, "auto"))
    return 1 if kv_dtype.startswith("fp8") else DTYPE_BYTES.get(kv_dtype, model_bytes)
