"""vLLM's start-up predicted end to end: from a model's `config.json`, the engine's knobs and the
device alone, the loaded weights (within 3 %) and the available KV cache memory (within 5 %) of public
start-up logs, each cited, and the KV tokens, each where the log states it.

Nothing of a log's outcome is fed in: each row states what a launch states (the model, the GPU, TP,
`gpu_memory_utilization`, `max_model_len`, `max_num_batched_tokens`, `max_num_seqs`, the vLLM
release and the sampler it logged) and the memory model derives the rest
(`rlaunch.rules.memory.rollout`, whose docstring names each term and its source).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules import memory
from rlaunch.rules.devices import GIB, device
from rlaunch.rules.memory import rollout
from tests.rules.test_memory import composed_of
from tests.rules.test_memory_model import DEEPSEEK_V2_LITE, FP8_CHANNEL, GPT_OSS_20B, GPT_OSS_120B, QWEN2_7B, arch
from tests.support.specs import LLAMA_31_8B, LLAMA_31_70B, plan, recipe, topology

# deepseek-ai/DeepSeek-R1-Distill-Qwen-14B config.json (the Qwen2.5-14B layout; no sliding window in use)
R1_DISTILL_QWEN_14B = {
    "model_type": "qwen2", "hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 48,
    "num_attention_heads": 40, "num_key_value_heads": 8, "vocab_size": 152064, "max_position_embeddings": 131072,
    "sliding_window": 131072, "use_sliding_window": False, "max_window_layers": 48, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}  # fmt: skip

# Qwen/Qwen3-0.6B and Qwen/Qwen3-32B config.json
QWEN3_06B = {
    "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "max_position_embeddings": 40960, "tie_word_embeddings": True, "torch_dtype": "bfloat16",
}  # fmt: skip
QWEN3_32B = {
    **QWEN3_06B, "hidden_size": 5120, "intermediate_size": 25600, "num_hidden_layers": 64, "num_attention_heads": 64,
    "tie_word_embeddings": False,
}  # fmt: skip
# RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic: the Llama-3.1-70B layout, FP8 per channel (compressed-tensors)
LLAMA_33_70B_FP8 = {**LLAMA_31_70B, "quantization_config": FP8_CHANNEL}

# V0 before 0.6.5 and its overhaul (vllm-project/vllm#10511) and after it: no sampler warm-up, graphs
# captured after the KV cache is sized.
V0 = memory.VllmRelease("V0", sampler_warmup=False, graphs_in_budget=False)
# V1 0.10.1.1: the sampler warmed up at max_num_seqs, graphs captured after the KV cache is sized.
V1_0_10 = memory.VllmRelease("0.10.1.1", graphs_in_budget=False)
V1_0_10_FLASHINFER = memory.VllmRelease("0.10.1.1", flashinfer_sampler=True, graphs_in_budget=False)
# V1 0.9.2 (a dev build after it) without FlashInfer ("FlashInfer is not available. Falling back to the PyTorch-native
# implementation of top-p & top-k sampling"): the PyTorch sampler, graphs captured after the KV cache is sized.
V0_9 = memory.VllmRelease("0.9.2", graphs_in_budget=False)
# V1 0.11.0: FlashInfer's sampler opt-in (VLLM_USE_FLASHINFER_SAMPLER), so the PyTorch one; graphs after.
V1_0_11 = memory.VllmRelease("0.11.0", graphs_in_budget=False)
DENNISLEE = "https://github.com/dennislee22/vLLM-benchmarking/blob/main/log/"
# llm-d/llm-d-benchmark's vLLM start-ups on one H100 (79.18 GiB), vLLM 0.11.0 (`vllm serve` on a GPU of 70 GiB
# or more: max_num_batched_tokens 8192, max_num_seqs 1024), --gpu-memory-utilization 0.9, --max-model-len 16000:
# "Model loading took", "Peak activation memory" (the sampler's 1024 x vocabulary rows), "Available KV cache memory"
LLMD = "https://github.com/llm-d/llm-d-benchmark/blob/4f4d44943c39b76b28e30dfa1fb0dfaf1ee894b5/config_explorer/empirical-vllm-memory-results.md"


@dataclass(frozen=True)
class StartUpLog:
    """One public vLLM start-up log: what its launch states, and what vLLM logged of its memory."""

    source: str
    release: memory.VllmRelease
    config: dict
    gpu: str
    util: float  # gpu_memory_utilization
    max_model_len: int
    batched: int  # max_num_batched_tokens as the log's scheduler states it (V0: max_model_len unless chunked)
    weights_gib: float | None  # "Loading model weights took" / "Model loading took" (per device); None: not published
    available_gib: float  # "kv_cache_size" / "Available KV cache memory" (per device)
    tokens: int | None = None  # "GPU KV cache size: N tokens" (V0: "# GPU blocks" x 16)
    tp: int = 1
    pp: int = 1  # the logged stage is the first (the most layers: the one that sizes the KV cache)
    seqs: int = 256  # max_num_seqs: vLLM's default (1024 for `vllm serve` on a GPU of 70 GiB or more, A100s aside)
    eager: bool = False  # enforce_eager (no log here runs eager)

    @property
    def id(self) -> str:
        return (
            f"{self.source.rsplit('/', 1)[-1]} {self.release.version} tp{self.tp}pp{self.pp} {self.max_model_len} "
            f"{self.available_gib}GiB"
        )


LOGS = [
    # vllm-project/vllm#10517 (comment of 2024-12-02), V0 0.6.4, meta-llama/Llama-3.1-8B-Instruct on an RTX 3090,
    # --max-model-len 20000 (no chunked prefill below 32k: the profile runs 20000 tokens), utilization 0.90:
    # "Loading model weights took 14.9888 GB", "total_gpu_memory=23.58GiB ... peak_torch_memory=17.06GiB ...
    # non_torch_memory=0.35GiB kv_cache_size=3.81GiB", "# GPU blocks: 1952"
    StartUpLog("https://github.com/vllm-project/vllm/issues/10517", V0, LLAMA_31_8B, "RTX3090", 0.9, 20000, 20000,
               14.9888, 3.81, 1952 * 16),
    # same, --max-model-len 29000: "peak_torch_memory=17.98GiB ... kv_cache_size=2.89GiB", "# GPU blocks: 1478"
    StartUpLog("https://github.com/vllm-project/vllm/issues/10517", V0, LLAMA_31_8B, "RTX3090", 0.9, 29000,
               29000, 14.9888, 2.89, 1478 * 16),
    # vllm-project/vllm#13061, V0 (0.7.x), deepseek-ai/DeepSeek-R1-Distill-Qwen-14B on two RTX 4090s,
    # --tensor_parallel_size 2 --gpu_memory_utilization=0.98, max seq len 131072 (chunked prefill, 2048 tokens):
    # "Loading model weights took 13.9476 GB", "non_torch_memory takes 0.25GiB; PyTorch activation peak memory
    # takes 0.19GiB; the rest of the memory reserved for KV Cache is 8.69GiB" (23.08 GiB = 0.98 x 23.55 GiB)
    StartUpLog("https://github.com/vllm-project/vllm/issues/13061", V0, R1_DISTILL_QWEN_14B, "RTX4090", 0.98,
               131072, 2048, 13.9476, 8.69, tp=2),
    # dennislee22/vLLM-benchmarking, vLLM 0.10.1.1 (V1), Qwen2-7B-Instruct on an A100 80GB, --max-model-len 16384,
    # --gpu-memory-utilization 0.25, chunked prefill at 2048 tokens, FlashInfer sampling: "Model loading took
    # 14.2488 GiB", "Available KV cache memory: 5.01 GiB", "GPU KV cache size: 93,872 tokens"
    StartUpLog(DENNISLEE + "vllm-7B-1gpuA10080GB-0.25GRAM.log", V1_0_10_FLASHINFER, QWEN2_7B, "A100-80GB", 0.25,
               16384, 2048, 14.2488, 5.01, 93872),
    # same, 0.5: "Available KV cache memory: 24.83 GiB", "GPU KV cache size: 464,848 tokens"
    StartUpLog(DENNISLEE + "vllm-7B-1gpuA10080GB-0.5GRAM.log", V1_0_10_FLASHINFER, QWEN2_7B, "A100-80GB", 0.5,
               16384, 2048, 14.2488, 24.83, 464848),
    # same, --tensor-parallel-size 2 on one node, 0.5: "Model loading took 7.1217 GiB", "Available KV cache
    # memory: 31.83 GiB", "GPU KV cache size: 1,192,160 tokens"
    StartUpLog(DENNISLEE + "vllm-7B-2gpuA10080GB-0.5GRAM-same-node.log", V1_0_10_FLASHINFER, QWEN2_7B, "A100-80GB",
               0.5, 16384, 2048, 7.1217, 31.83, 1192160, tp=2),
    # same model, two A100 40GB on two nodes, TP2, 0.5, "FlashInfer is not available. Falling back to the
    # PyTorch-native implementation of top-p & top-k sampling": "Model loading took 7.1217 GiB",
    # "Available KV cache memory: 11.03 GiB", "GPU KV cache size: 412,944 tokens"
    StartUpLog(DENNISLEE + "vllm-7B-2gpuA10040GB-0.5GRAM-diff-nodes.log", V1_0_10, QWEN2_7B, "A100-40GB", 0.5,
               16384, 2048, 7.1217, 11.03, 412944, tp=2),
    # same release, openai/gpt-oss-120b on four A100 80GB, TP4, 0.8, --max-model-len 16384, FlashInfer sampling:
    # "Model loading took 17.2217 GiB", "Available KV cache memory: 45.32 GiB", "GPU KV cache size: 2,640,144 tokens"
    StartUpLog(DENNISLEE + "vllm-120B-4gpuA10080GB-0.8GRAM-diff-nodes.log", V1_0_10_FLASHINFER, GPT_OSS_120B,
               "A100-80GB", 0.8, 16384, 2048, 17.2217, 45.32, 2640144, tp=4),
    # llm-d: meta-llama/Llama-3.1-8B-Instruct, "14.99 GiB", "Peak activation memory: 4.76 GiB", "51.38 GiB"
    StartUpLog(LLMD + "#llama-31-8b", V1_0_11, LLAMA_31_8B, "H100", 0.9, 16000, 8192, 14.99, 51.38, seqs=1024),
    # llm-d: Qwen/Qwen3-0.6B, "1.12 GiB", "5.56 GiB" peak activation, "64.45 GiB"
    StartUpLog(LLMD + "#qwen3-06b", V1_0_11, QWEN3_06B, "H100", 0.9, 16000, 8192, 1.12, 64.45, seqs=1024),
    # llm-d: openai/gpt-oss-20b, "13.47 GiB", "7.38 GiB" peak activation, "50.28 GiB"
    StartUpLog(LLMD + "#gpt-oss-20b", V1_0_11, GPT_OSS_20B, "H100", 0.9, 16000, 8192, 13.47, 50.28, seqs=1024),
    # llm-d: Qwen/Qwen3-32B, TP2, "30.59 GiB", "5.64 GiB" peak activation, "34.49 GiB"
    StartUpLog(LLMD + "#qwen3-32b-tp2", V1_0_11, QWEN3_32B, "H100", 0.9, 16000, 8192, 30.59, 34.49, tp=2,
               seqs=1024),
    # llm-d: RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic, TP2, "33.88 GiB", "4.84 GiB" peak activation, "32.0 GiB"
    StartUpLog(LLMD + "#llama-33-70b-fp8-tp2", V1_0_11, LLAMA_33_70B_FP8, "H100", 0.9, 16000, 8192, 33.88, 32.0,
               tp=2, seqs=1024),
    # vllm-project/vllm#20665, vLLM 0.9.2 (a dev build after it), deepseek-ai/DeepSeek-V2-Lite (MLA, 64 routed experts)
    # on four L4s, --tensor-parallel-size 2 --pipeline-parallel-size 2 --max-model-len 1024, the defaults otherwise
    # (utilization 0.9; `vllm serve` on a GPU under 70 GiB: max_num_batched_tokens 2048, max_num_seqs 256; the LLM
    # class's 8192 tokens predict 12.19 GiB, as close), "FlashInfer is not available. Falling back to the
    # PyTorch-native implementation of top-p & top-k sampling": the first stage
    # (14 of 27 layers, no sampler) "Available KV cache memory: 12.13 GiB", the last (13 layers and the sampler)
    # "11.33 GiB", "GPU KV cache size: 807,792 tokens" (the first stage's blocks). The thread as published shows no
    # "Model loading took" line: the weights are checked through the available KV alone.
    StartUpLog("https://github.com/vllm-project/vllm/pull/20665", V0_9, DEEPSEEK_V2_LITE, "L4", 0.9, 1024, 2048,
               None, 12.13, 807792, tp=2, pp=2),
]  # fmt: skip

# Logs the chain misses, kept with how far: a small KV cache magnifies the overhead's error (here 0.27 GiB:
# the sampler's ten rows where vLLM peaked at 9.7, non-torch 0.3 GiB where it logged 0.14).
MISSES = [
    # llm-d: Qwen/Qwen3-32B, TP1, "61.03 GiB", "5.64 GiB" peak activation, "4.45 GiB" (ours: 4.18 GiB, -6.1 %)
    (StartUpLog(LLMD + "#qwen3-32b-tp1", V1_0_11, QWEN3_32B, "H100", 0.9, 16000, 8192, 61.03, 4.45, seqs=1024), 0.07),
]  # fmt: skip


def predicted(log: StartUpLog) -> memory.KvCapacity:
    """The whole chain: the launch's recipe composed on the runtime's base config, its geometry, the
    device, then the memory model (nothing of the log's outcome goes in)."""
    shape = plan(
        num_inference_engines=8 // (log.tp * log.pp),
        inference_engine_tensor_parallel_size=log.tp,
        inference_engine_pipeline_parallel_size=log.pp,
    )
    topo = topology(shape, gpu_variant=log.gpu)
    engine = {
        "gpu_memory_utilization": log.util,
        "max_num_batched_tokens": log.batched,
        "max_num_seqs": log.seqs,
        "enforce_eager": log.eager,
        "engine_init_kwargs": {"max_model_len": log.max_model_len},
    }
    composed = composed_of(topo, recipe(generator={"inference_engine": engine}))
    dev = device(log.gpu)
    assert dev is not None, log.gpu
    return memory.engine_kv(arch(log.config), Geometry.from_recipe(composed), composed, dev, log.release)


def misses(log: StartUpLog) -> list[str]:
    """What of `log` the chain misses: weights beyond 3 %, available KV or tokens beyond 5 %."""
    kv = predicted(log)
    found = []
    if log.weights_gib is not None and abs(kv.weights / GIB - log.weights_gib) > 0.03 * log.weights_gib:
        found.append(f"weights {kv.weights / GIB:.2f} GiB, logged {log.weights_gib}")
    if abs(kv.available / GIB - log.available_gib) > 0.05 * log.available_gib:
        found.append(f"available KV {kv.available / GIB:.2f} GiB, logged {log.available_gib}")
    if log.tokens is not None and abs(kv.tokens - log.tokens) > 0.05 * log.tokens:
        found.append(f"KV tokens {kv.tokens}, logged {log.tokens}")
    return found


@pytest.mark.parametrize("log", LOGS, ids=[log.id for log in LOGS])
def test_weights_and_available_kv_are_predicted_from_the_launch_alone(log: StartUpLog) -> None:
    assert misses(log) == [], log.source


@pytest.mark.parametrize(("log", "within"), MISSES, ids=[log.id for log, _ in MISSES])
def test_a_log_the_chain_misses_is_missed_by_no_more_than_is_stated(log: StartUpLog, within: float) -> None:
    kv = predicted(log)
    assert misses(log) == [f"available KV {kv.available / GIB:.2f} GiB, logged {log.available_gib}"]
    assert abs(kv.available / GIB - log.available_gib) <= within * log.available_gib


@pytest.mark.parametrize(
    ("term", "zeroed"),
    [
        ("forward_peak", lambda a, tp, batched: 0),
        ("sampler_peak", lambda a, seqs, rows=0: 0),
        ("non_torch", lambda tp: 0),
    ],
)
def test_each_term_is_needed_removing_it_puts_a_log_out_of_tolerance(
    monkeypatch: pytest.MonkeyPatch, term: str, zeroed: object
) -> None:
    monkeypatch.setattr(rollout, term, zeroed)
    assert [log.id for log in LOGS if misses(log)], f"no log needs {term}"


def test_cuda_graphs_count_only_where_the_release_profiles_them_and_only_without_eager() -> None:
    """Before 0.21 vLLM captures graphs after sizing the KV cache (0.10.1.1: "Graph capturing finished
    ... took 0.50 GiB" after "Available KV cache memory"); from 0.21, and in the locked release, it
    profiles them first and the KV cache is that much smaller, unless the engine runs eager."""
    log = LOGS[3]
    profiled = replace(log, release=replace(log.release, graphs_in_budget=True))
    assert memory.LOCKED_VLLM.graphs_in_budget and not log.release.graphs_in_budget
    assert predicted(log).available - predicted(profiled).available == memory.CUDA_GRAPHS
    assert misses(profiled), "the 0.10.1.1 log leaves the graphs out of its budget"
    assert predicted(replace(profiled, eager=True)).available == predicted(log).available


def test_the_sampler_warm_up_follows_the_release_and_its_kernel() -> None:
    """V0 profiles no sampler peak; V1 warms the sampler up over max_num_seqs x vocabulary, its
    PyTorch top-k/top-p path five times FlashInfer's (the A100 40GB log, without FlashInfer)."""
    assert V0.sampler_rows == 0
    assert V1_0_10.sampler_rows == memory.SAMPLER_ROWS == 5 * V1_0_10_FLASHINFER.sampler_rows
    assert memory.LOCKED_VLLM.sampler_rows == memory.FLASHINFER_SAMPLER_ROWS  # the lock carries flashinfer-python
    no_flashinfer = LOGS[6]
    assert misses(replace(no_flashinfer, release=V1_0_10_FLASHINFER)), "the PyTorch sampler's peak is needed"


@pytest.mark.parametrize(
    ("engine", "rows"),
    [
        ({}, memory.FLASHINFER_SAMPLER_ROWS),
        ({"enable_return_sample_support_set": True}, memory.SAMPLER_ROWS),
        ({"engine_init_kwargs": {"logprobs_mode": "processed_logits"}}, memory.SAMPLER_ROWS),
        ({"engine_init_kwargs": {"logprobs_mode": "raw_logprobs"}}, memory.FLASHINFER_SAMPLER_ROWS),
        # SkyRL applies engine_init_kwargs after its own setting: the explicit mode wins
        (
            {"enable_return_sample_support_set": True, "engine_init_kwargs": {"logprobs_mode": "raw_logprobs"}},
            memory.FLASHINFER_SAMPLER_ROWS,
        ),
    ],
)
def test_the_locked_release_samples_with_pytorch_where_processed_logprobs_are_asked_for(
    engine: dict, rows: int
) -> None:
    """FlashInfer's kernel returns no processed logprobs, so vLLM 0.30.0 falls back to PyTorch's
    sampler (and its larger warm-up) where `logprobs_mode` asks for them."""
    settings = {"max_num_seqs": 1024, **engine}
    composed = composed_of(topology(), recipe(generator={"inference_engine": settings}))
    a = arch(QWEN3_06B)  # a peak its sampler decides: 1024 sequences of a 152k vocabulary
    kv = memory.engine_kv(a, Geometry.from_recipe(composed), composed, device("H100"))
    sampler = memory.sampler_peak(a, 1024, rows)
    assert sampler > memory.forward_peak(a, 1, 8192)
    assert kv.overhead == sampler + memory.non_torch(1) + memory.CUDA_GRAPHS


def test_with_pipeline_stages_the_stage_that_sizes_the_kv_cache_samples_only_if_it_is_the_last() -> None:
    """vLLM gives the layers that do not divide to the stages before the last, and only the last
    samples: DeepSeek-V2-Lite's 27 layers over two stages leave the sampler off the fuller first
    stage (#20665 logs the last stage 0.8 GiB below it); 26 layers make the last stage as full as
    any, and its sampler counts, as it does without PP."""
    (log,) = [log for log in LOGS if log.pp > 1]
    a, tp = arch(log.config), log.tp
    forward, base = memory.forward_peak(a, tp, log.batched), memory.non_torch(tp)
    sampler = memory.sampler_peak(a, log.seqs, log.release.sampler_rows)
    assert a.layers % log.pp == 1 and sampler > forward  # the case where the sampler decides the peak
    assert predicted(log).overhead == forward + base
    even = replace(log, config={**log.config, "num_hidden_layers": 26})
    assert predicted(even).overhead == sampler + base
    assert predicted(replace(log, pp=1)).overhead == sampler + base


def test_the_table_is_ten_public_logs_of_five_architectures_and_four_releases() -> None:
    """Issue 41's acceptance: ten cited logs of five architectures (llama, qwen2, qwen3, gpt_oss and
    deepseek_v2's multi-head latent attention), each passing the whole chain, over four releases."""
    assert all(log.source.startswith("https://") for log in LOGS)
    assert len({log.source for log in LOGS}) >= 10
    assert len({log.release.version for log in LOGS}) >= 4
    assert len({arch(log.config).model_type for log in LOGS}) >= 5
    assert sum(log.weights_gib is not None for log in LOGS) >= 10  # loaded weights checked on ten of them
