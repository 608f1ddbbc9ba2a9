"""The memory model: every role's per-GPU peak, from the composed launch document and the model.

One `MemoryTable` per plan: a row per role and phase with the estimated bytes on one device, the
device's capacity (`rlaunch.rules.devices`) and the part of the estimate that is certain (a lower
bound). Three rules refuse a plan, and only on certain failures: the policy's (or reference's)
model states alone exceed the device; a rollout engine's weights per shard exceed its
`gpu_memory_utilization` budget; the KV cache that budget leaves after the weights cannot hold one
maximum-length sequence (vLLM then refuses to start). Everything else is an estimate: a row whose
estimate is within `TIGHT_MARGIN` of capacity (or over it) is shown as tight, never refused: a
false alarm blocks a run that would have worked.

What is counted, per device (SkyRL 0.4.0 keys, `skyrl_040_keys.md`):

* training (FSDP2, as PyTorch's own tracker accounts the same step: tests/runtimes/test_memtracker.py):
  model states sharded over the FSDP group (fp32 parameters, fp32 gradients and two fp32 Adam
  moments: 16 bytes a parameter; 12 of them certain; none with `cpu_offload`; bf16 weights only
  with LoRA), then the larger of two phases, never their sum. Forward/backward: the gathered bf16
  parameters of the phase (`_FsdpPhases`), the activations one micro batch keeps (the layer inputs
  with gradient checkpointing, every layer's saved tensors without), and the larger of the bf16
  logits with their gradient (two `[tokens x vocab]` tensors: flash-attn's in-place cross entropy
  and the in-place temperature division) and a layer's backward; or the root's own backward.
  Optimizer step: foreach AdamW's fp32 temporary, 4 bytes a parameter. Megatron: bf16 weights and
  fp32 gradients over TP x PP (experts over EP x ETP x PP), the distributed optimizer's 12 bytes a
  parameter over data parallelism as well (dense over world / (TP x PP x CP), experts over the
  expert data-parallel group world / (EP x ETP x PP)), activations over TP x CP (sequence
  parallelism) and the vocabulary-parallel fp32 logits as the micro batch's tokens over CP x
  vocab / TP;
* reference: bf16 weights over its FSDP group or its own Megatron TP x PP (x EP), resident beside
  the policy unless fully colocated (SkyRL offloads it between uses), one forward micro batch split
  by its own TP x CP (or SP) as the training rows split theirs;
* a micro batch holds `micro x max_model_len` tokens, or with `max_tokens_per_microbatch` that
  budget (a single longer sequence still runs alone);
* rollout (vLLM): weights per TP x PP shard as the checkpoint packs them (`quantization_config`,
  with the padding vLLM's MXFP4 kernels add per shard; experts over EP when EP > 1), or as vLLM packs
  an unquantized checkpoint online (`engine_init_kwargs.quantization`: `ONLINE_QUANTIZATION`), less
  the `cpu_offload_gb` each device leaves in CPU memory; the budget
  `gpu_memory_utilization x capacity`, an estimate of the profiling peak (`profile_peak`: from the
  model, TP, `max_num_batched_tokens`, `max_num_seqs`), non-torch memory and CUDA graphs as the
  locked vLLM release counts them (`VllmRelease`, `LOCKED_VLLM`; each term held to public start-up
  logs end to end in tests/rules/test_vllm_startup.py), and the KV cache that is left, with vLLM V1's own arithmetic (`kv_capacity`, held to published start-up logs):
  the KV dtype (`auto` is the activation dtype), 16-token blocks (64 for MLA on Hopper:
  `kv_block_size`), the layers of the first pipeline stage, hybrid groups of sliding-window and full
  layers (`kv_groups`), MLA's latent replicated over TP; tokens and maximum-length sequences
  (`max_model_len` = SkyRL's `max_input_length + max_generate_length`);
* colocated: the training bar (the policy's step while the engine sleeps), the weight sync (the
  engine's weights woken beside the policy's resident weights, its optimizer offloaded, and one
  gathered bf16 tensor being broadcast) and the generation bar (the engine's budget while the
  policy is offloaded).

One entrance, `table_for` (a plan as the rules judge it, whether from a launch document or from
`rlaunch fit`'s spec), and `sft_table` for an SFT step job (the policy's training rows alone, on
its StepExecution's device), split by what it sizes: `training` (the policy, critic and reference), `rollout`
(the vLLM engine), `table` (what fits: the plan's table and its certain failures); `rows` holds
what they share.
"""

from rlaunch.rules.devices import GIB
from rlaunch.rules.memory.rollout import (
    CUDA_GRAPHS,
    FLASHINFER_SAMPLER_ROWS,
    FLASHMLA_BLOCK,
    LOCKED_VLLM,
    NON_TORCH,
    NON_TORCH_TP,
    ONLINE_QUANTIZATION,
    SAMPLER_ROWS,
    VLLM_BLOCK,
    EngineWeights,
    KvCapacity,
    KvGroups,
    VllmRelease,
    engine_kv,
    engine_weights,
    forward_peak,
    kv_block_size,
    kv_bytes_per_token,
    kv_cache_bytes,
    kv_capacity,
    kv_groups,
    kv_tokens,
    max_concurrency,
    non_torch,
    profile_peak,
    rollout_rows,
    sampler_peak,
)
from rlaunch.rules.memory.rows import TIGHT_MARGIN, Keys, Row, gib, max_model_len
from rlaunch.rules.memory.table import CODES, MemoryTable, estimate, memory_rules, sft_table, table_for, violations
from rlaunch.rules.memory.training import ADAM_STEP_BYTES, FSDP_CERTAIN_BYTES, FSDP_STATE_BYTES

__all__ = [
    "ADAM_STEP_BYTES",
    "CODES",
    "CUDA_GRAPHS",
    "FLASHINFER_SAMPLER_ROWS",
    "FLASHMLA_BLOCK",
    "FSDP_CERTAIN_BYTES",
    "FSDP_STATE_BYTES",
    "GIB",
    "LOCKED_VLLM",
    "NON_TORCH",
    "NON_TORCH_TP",
    "ONLINE_QUANTIZATION",
    "SAMPLER_ROWS",
    "TIGHT_MARGIN",
    "VLLM_BLOCK",
    "EngineWeights",
    "Keys",
    "KvCapacity",
    "KvGroups",
    "MemoryTable",
    "Row",
    "VllmRelease",
    "engine_kv",
    "engine_weights",
    "estimate",
    "forward_peak",
    "gib",
    "kv_block_size",
    "kv_bytes_per_token",
    "kv_cache_bytes",
    "kv_capacity",
    "kv_groups",
    "kv_tokens",
    "max_concurrency",
    "max_model_len",
    "memory_rules",
    "non_torch",
    "profile_peak",
    "rollout_rows",
    "sampler_peak",
    "sft_table",
    "table_for",
    "violations",
]
