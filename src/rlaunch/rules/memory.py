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
  with the padding vLLM's MXFP4 kernels add per shard; experts over EP when EP > 1), the budget
  `gpu_memory_utilization x capacity`, an estimate of the profiling peak (`profile_peak`: from the
  model, TP, `max_num_batched_tokens`, `max_num_seqs`), CUDA graphs and non-torch memory, and the KV
  cache that is left, with vLLM V1's own arithmetic (`kv_capacity`, held to published start-up logs):
  the KV dtype (`auto` is the activation dtype), 16-token blocks (64 for MLA on Hopper:
  `kv_block_size`), the layers of the first pipeline stage, hybrid groups of sliding-window and full
  layers (`kv_groups`), MLA's latent replicated over TP; tokens and maximum-length sequences
  (`max_model_len` = SkyRL's `max_input_length + max_generate_length`);
* colocated: the training bar (the policy's step while the engine sleeps), the weight sync (the
  engine's weights woken beside the policy's resident weights, its optimizer offloaded, and one
  gathered bf16 tensor being broadcast) and the generation bar (the engine's budget while the
  policy is offloaded).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from rlaunch.dotted import get_path
from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules.devices import GIB, Device, device, host_slot
from rlaunch.rules.model_shape import DTYPE_BYTES, FAMILIES, Architecture, Unsized
from rlaunch.rules.subject import Subject, Violation, violation
from rlaunch.rules.topology import wider_engines

TIGHT_MARGIN = 0.10  # an estimate above 90 % of capacity is tight
VLLM_BLOCK = 16  # tokens per KV block (vLLM's default block size)
FLASHMLA_BLOCK = 64  # vLLM forces it for MLA on Hopper (platforms/cuda.py: FlashMLA, the default MLA backend there)
CUDA_GRAPHS = int(0.5 * GIB)  # vLLM's captured graphs, when not in eager mode (estimate)
NON_TORCH = int(0.5 * GIB)  # CUDA context, NCCL buffers (estimate)
SAMPLER_ROWS = 10  # vocabulary-wide fp32 rows per sequence at the sampler's warm-up peak (fit, see profile_peak)
FSDP_STATE_BYTES, FSDP_CERTAIN_BYTES = 16, 12
ADAM_STEP_BYTES = 4  # foreach AdamW's fp32 temporary per parameter (sqrt of the second moment)
CODES = ("memory.model_states", "memory.engine_weights", "memory.kv_one_sequence")  # = rules.MEMORY_CODES


@dataclass(frozen=True)
class Row:
    """One role x phase on one device: bytes estimated, capacity, the certain part, how it is made."""

    role: str
    phase: str
    estimate: int
    capacity: int
    certain: int = 0
    detail: str = ""
    margin: float = TIGHT_MARGIN  # 0 for a row that is a budget by design (vLLM claims its share)
    parts: tuple[tuple[str, int], ...] = ()  # the estimate by term (states, activations, logits, ...)

    def part(self, name: str) -> int:
        """One term of the estimate (0 when the row has no such term)."""
        return sum(n for term, n in self.parts if term == name)

    @property
    def headroom(self) -> int:
        return self.capacity - self.estimate

    @property
    def status(self) -> str:
        if self.certain > self.capacity:
            return "REFUSED"
        if self.estimate > self.capacity:
            return "over (estimate)"
        return "tight" if self.estimate > self.capacity * (1 - self.margin) else "ok"

    def as_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "phase": self.phase,
            "estimate_gib": gib(self.estimate),
            "capacity_gib": gib(self.capacity),
            "headroom_gib": gib(self.headroom),
            "certain_gib": gib(self.certain),
            "status": self.status,
            "detail": self.detail,
        }


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


@dataclass(frozen=True)
class MemoryTable:
    """Every row, the device it was sized against, the engine's KV capacity, and what was not sized."""

    device: Device | None
    rows: tuple[Row, ...] = ()
    kv: KvCapacity | None = None
    unsized: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        kv = None
        if self.kv is not None:
            kv = {
                "budget_gib": gib(self.kv.budget),
                "available_gib": gib(self.kv.available),
                "tokens": self.kv.tokens,
                "max_model_len": self.kv.max_model_len,
                "sequences": round(self.kv.sequences, 2),
            }
        return {
            "device": None
            if self.device is None
            else {"name": self.device.name, "capacity_gib": gib(self.device.bytes)},
            "rows": [r.as_dict() for r in self.rows],
            "kv_cache": kv,
            "unsized": list(self.unsized),
        }

    def warnings(self) -> list[str]:
        """What the plan and readiness show without refusing: rows that are tight, what was not sized."""
        out = [f"memory: {reason}" for reason in self.unsized]
        for r in self.rows:
            if r.status in ("tight", "over (estimate)"):
                out.append(
                    f"memory {r.status}: {r.role} {r.phase} needs ~{gib(r.estimate)} of {gib(r.capacity)} GiB "
                    f"per device ({r.detail}); an estimate, not refused: watch for OOM"
                )
        return out


def gib(n: int) -> float:
    return round(n / GIB, 2)


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
    return 2 * math.ceil(arch.layers / pp) * math.ceil(arch.kv_heads / tp) * arch.head_dim * dtype_bytes


def max_concurrency(tokens: int, max_model_len: int) -> float:
    """vLLM's "Maximum concurrency for N tokens per request" (full attention)."""
    return tokens / max_model_len


# --- the model --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Keys:
    """The composed recipe's keys the model reads, with SkyRL's own defaults already composed in."""

    recipe: Mapping[str, Any]

    def __call__(self, key: str, default: Any = None) -> Any:
        value = get_path(self.recipe, key, None)
        return default if value is None else value


def max_model_len(composed: Mapping[str, Any]) -> int:
    """vLLM's `max_model_len`: an explicit engine setting, else SkyRL's input + generation budget."""
    k = _Keys(composed)
    explicit = k("generator.inference_engine.engine_init_kwargs.max_model_len")
    if isinstance(explicit, int) and explicit > 0:
        return explicit
    prompt = int(k("generator.max_input_length", k("trainer.max_prompt_length", 0)))
    return prompt + int(k("generator.sampling_params.max_generate_length", 0))


def estimate(
    arch: Architecture, geo: Geometry, composed: Mapping[str, Any], dev: Device, *, cpu: bool = False
) -> MemoryTable:
    """The memory table of one plan on `dev` (see the module docstring)."""
    k = _Keys(composed)
    seq = max_model_len(composed)
    rows: list[Row] = []
    train = _training(arch, geo, k, seq, dev, "policy", cpu=cpu)
    ref = _reference(arch, geo, k, seq, dev) if geo.use_reference else None
    if cpu:
        rows += [train.states, train.step]
        return MemoryTable(dev, tuple(rows))
    critic = _training(arch, geo, k, seq, dev, "critic", cpu=False) if geo.use_critic else None
    kv = engine_kv(arch, geo, composed, dev)
    engine_rows = rollout_rows(kv, geo)
    rows += [train.states]
    if geo.colocate_all:
        rows.append(
            Row(
                "colocated",
                "training bar",
                train.step.estimate,
                dev.bytes,
                train.step.certain,
                train.step.detail + "; engine asleep",
                parts=train.step.parts,
            )
        )
        if ref is not None:
            rows.append(ref)
        rows += engine_rows
        gathered = 2 * max(arch.vocab * arch.hidden, arch.layer_params())
        rows.append(
            Row(
                "colocated",
                "weight sync",
                kv.weights + train.resident + gathered,
                dev.bytes,
                0,
                f"engine weights {gib(kv.weights)} woken beside the policy's resident weights {gib(train.resident)} "
                f"(optimizer offloaded) and one gathered bf16 tensor {gib(gathered)} GiB being broadcast; "
                "the KV pool wakes after the policy is offloaded",
            )
        )
        rows.append(
            Row(
                "colocated",
                "generation bar",
                kv.budget,
                dev.bytes,
                0,
                "engine awake; policy and reference offloaded to CPU",
                0.0,
            )
        )
    else:
        resident = ref.certain if ref is not None else 0
        detail = train.step.detail + (f"; + reference weights {gib(resident)} GiB resident" if resident else "")
        rows.append(
            Row(
                "policy",
                "training step",
                train.step.estimate + resident,
                dev.bytes,
                train.step.certain + resident,
                detail,
            )
        )
        if ref is not None:
            rows.append(
                Row(
                    ref.role,
                    ref.phase,
                    ref.estimate + train.states.estimate,
                    dev.bytes,
                    ref.certain + train.states.certain,
                    ref.detail + f"; + policy states {gib(train.states.estimate)} GiB resident",
                )
            )
        rows += engine_rows
    if critic is not None:  # its own step: colocated, SkyRL offloads the policy while the critic trains
        rows += [critic.states, critic.step]
    return MemoryTable(dev, tuple(rows), kv)


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
            f"per TP{geo.tp} x PP{geo.pp} shard, against the utilization budget",
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


@dataclass(frozen=True)
class _Training:
    states: Row
    step: Row
    resident: int  # the policy's weights on one device while a colocated engine wakes (optimizer offloaded)


def _lora(k: _Keys, role: str) -> bool:
    return int(k(f"trainer.{role}.model.lora.rank", 0) or 0) > 0


def _training(arch: Architecture, geo: Geometry, k: _Keys, seq: int, dev: Device, role: str, *, cpu: bool) -> _Training:
    """The policy's (or the critic's) training rows. The critic is the policy's model with a value
    head (hidden -> 1) for its LM head, trained on its own GPUs: one fp32 value a token, no vocabulary."""
    critic = role == "critic"
    p = arch.params.total - arch.params.lm_head + arch.hidden if critic else arch.params.total
    world, vocab = (geo.critic_world, 1) if critic else (geo.policy_world, arch.vocab)
    micro = int(k("trainer.micro_train_batch_size_per_gpu", geo.micro_batch))
    checkpointing = bool(k("trainer.gradient_checkpointing", True))
    if geo.strategy == "megatron" and not cpu:
        m = _megatron(arch, k, role, geo.megatron_policy)
        tp, pp, cp = geo.megatron_policy
        dense_dp = max(1, world // (tp * pp * cp))
        expert_dp = max(1, world // (m.ep * m.etp * pp))
        optimizer = (
            0
            if k(f"trainer.{role}.megatron_config.optimizer_config_kwargs.optimizer_cpu_offload", False)
            else int(12 * (m.dense / dense_dp + m.experts / expert_dp))
        )
        states = int(6 * m.shard + optimizer) if not _lora(k, role) else int(2 * m.shard)
        certain = int(2 * m.shard + optimizer) if not _lora(k, role) else int(2 * m.shard)
        how = (
            f"Megatron TP{tp} x PP{pp} x CP{cp} (EP{m.ep} x ETP{m.etp}), distributed optimizer over DP{dense_dp} "
            f"(experts over DP{expert_dp})"
        )
        fsdp: _FsdpPhases | None = None
        resident = int(2 * m.shard)
        layers = math.ceil(arch.layers / pp)
    else:
        shard = 1 if cpu else _fsdp_shard(k, role, world)
        offload = not cpu and bool(k(f"trainer.{role}.fsdp_config.cpu_offload", False))
        lora = _lora(k, role)
        per_param, certain_per_param = (2, 2) if lora else (FSDP_STATE_BYTES, FSDP_CERTAIN_BYTES)
        states = 0 if offload else p * per_param // shard
        certain = 0 if offload else p * certain_per_param // shard
        optimizer = 0 if offload or lora or cpu else ADAM_STEP_BYTES * p // shard
        how = ("one full replica per slot" if cpu else f"FSDP over {shard} GPUs") + (", CPU offload" if offload else "")
        fsdp = None if cpu else _FsdpPhases(arch, shard, frozen=lora)
        resident = 0 if offload else (2 if lora else 4) * p // shard
        layers = arch.layers
    split = _token_split(geo, role, cpu)
    micro_tokens = _micro_tokens(k, micro, seq)
    layout = (
        "packed"
        if k("trainer.remove_microbatch_padding", True)
        else f"padded: {micro} x {seq}, the worst case whatever the lengths"
    )
    tokens = micro_tokens // split.activations
    saved = _saved_bytes_per_token(arch)
    kept = layers * tokens * (2 * arch.hidden if checkpointing else saved)
    # FSDP keeps bf16 logits, written over by their gradient (flash-attn's in-place cross entropy), and
    # the gradient through the in-place division by the temperature: two vocabulary-wide tensors.
    # Megatron's vocabulary-parallel log-probs hold one fp32 copy; the CPU trainer's model is fp32.
    fp32_logits = geo.strategy == "megatron" or cpu
    # the critic's one fp32 value a token; a softcapped model's tanh output is saved beside its logits
    logit_bytes = 4 if fp32_logits or critic else 2 * 2 + _softcap_bytes(arch)
    logits = micro_tokens // split.logit_tokens * max(1, vocab // split.vocab) * logit_bytes
    backward = tokens * ((saved if checkpointing else 0) + _backward_bytes_per_token(arch))
    gathered, logits_gathered, layer_gathered, reduce, root = (
        (0, 0, 0, 0, 0)
        if fsdp is None
        else (fsdp.root, fsdp.logits_backward, fsdp.layer_backward, fsdp.layer_reduce, fsdp.root_backward)
    )
    layer = max(backward + layer_gathered, reduce)
    forward_backward = states + max(gathered + kept + max(logits + logits_gathered, layer), root)
    step = max(forward_backward, states + optimizer)
    parts = (
        ("states", states),
        ("gathered", gathered + max(logits_gathered, layer_gathered, reduce)),
        ("activations", kept),
        ("logits", logits),
        ("backward", backward),
        ("root backward", root),
        ("optimizer step", optimizer),
    )
    detail = (
        f"states {gib(states)} ({how}) + gathered {gib(gathered + max(logits_gathered, layer_gathered, reduce))} + "
        f"activations {gib(kept)} ({tokens} tokens/micro batch, {layout}, checkpointing {'on' if checkpointing else 'off'}) "
        f"+ the larger of {'fp32 logits' if fp32_logits else 'bf16 logits and their gradient'} {gib(logits)} and a layer's backward "
        f"{gib(backward)} GiB"
        + (
            f"; the embeddings' backward, states + {gib(root)} GiB, is the larger"
            if root and forward_backward == states + root
            else ""
        )
        + (
            f"; the optimizer step's peak, states + {gib(optimizer)} GiB, is the larger"
            if step > forward_backward
            else ""
        )
        + (
            "; the vision tower's weights are counted, its activations on the images are not "
            "(how many images a sample holds, and at what resolution, is not in the recipe)"
            if arch.params.vision
            else ""
        )
    )
    return _Training(
        Row(role, "model states", states, dev.bytes, certain, how),
        Row(role, "training step", step, dev.bytes, certain, detail, parts=parts),
        resident,
    )


@dataclass(frozen=True)
class _MegatronShard:
    """A Megatron role's parameters on one rank: dense over TP x PP, experts over EP x ETP x PP."""

    dense: float
    experts: float
    ep: int
    etp: int

    @property
    def shard(self) -> float:
        return self.dense + self.experts


def _megatron(arch: Architecture, k: _Keys, role: str, sizes: tuple[int, int, int]) -> _MegatronShard:
    tp, pp, _ = sizes
    ep = int(k(f"trainer.{role}.megatron_config.expert_model_parallel_size", 1))
    etp = int(k(f"trainer.{role}.megatron_config.expert_tensor_parallel_size", tp))
    experts = arch.params.experts
    return _MegatronShard((arch.params.total - experts) / (tp * pp), experts / (ep * etp * pp), ep, etp)


@dataclass(frozen=True)
class _TokenSplit:
    """How one rank's share of a micro batch is cut: activations over TP x CP (Megatron's sequence
    parallelism) or Ulysses SP; the vocabulary-parallel logits hold the micro batch's tokens over CP
    (or SP) x vocab / TP."""

    activations: int
    logit_tokens: int
    vocab: int


def _token_split(geo: Geometry, role: str, cpu: bool) -> _TokenSplit:
    if geo.strategy == "megatron" and not cpu:
        tp, _, cp = geo.megatron_policy if role == "policy" else geo.megatron_ref
        return _TokenSplit(tp * cp, cp, tp)
    sp = max(1, {"policy": geo.policy_sp, "critic": geo.critic_sp}.get(role, geo.ref_sp) or 1)
    return _TokenSplit(sp, sp, 1)


def _micro_tokens(k: _Keys, micro: int, seq: int) -> int:
    """Tokens of one micro batch at most: `micro` sequences of `seq`, or SkyRL's token budget
    (`max_tokens_per_microbatch`), which a single longer sequence still exceeds alone."""
    budget = int(k("trainer.max_tokens_per_microbatch", -1))
    return max(budget, seq) if budget > 0 else micro * seq


def _fsdp_shard(k: _Keys, role: str, world: int) -> int:
    size = int(k(f"trainer.{role}.fsdp_config.fsdp_size", -1))
    return size if 0 < size <= world else max(1, world)


@dataclass(frozen=True)
class _FsdpPhases:
    """What FSDP2 holds unsharded beside the shards, by phase (measured against PyTorch's tracker,
    tests/runtimes/test_memtracker.py). The root module's bf16 embeddings and LM head stay gathered
    through forward and backward (the root does not reshard after forward). Sharded over more than
    one GPU, the logits' backward holds a layer and its prefetched neighbour (bf16), a layer's
    backward a layer, its bf16 gradient and its fp32 reduce-scatter input. The root's own backward
    comes last, activations gone: its bf16 gradients, their fp32 copy for the reduction and the
    reduced fp32 shard. In a forward without gradients, sharded, each layer's unshard holds three
    gatherings at once: FSDP2 keeps the previous group's all-gather buffer past its copy-out to
    overlap it with the next all-gather (`comm_ctx.all_gather_state`) and drops it in the next
    group's `wait_for_unshard`, whose local `prev_all_gather_state` still holds it through that
    group's copy-out, so a layer's copy-out into its unsharded parameters runs beside its own
    all-gather buffer and the previous group's: the root's (embeddings and LM head) for the first
    layer. An MoE layer is large beside its forward's activations, so this moment decides its peak."""

    arch: Architecture
    shard: int
    frozen: bool = False  # LoRA: the base has no gradients to reduce

    @property
    def _root(self) -> int:
        return self.arch.params.embeddings + self.arch.params.lm_head

    @property
    def _layer(self) -> int:
        return self.arch.layer_params()

    @property
    def root(self) -> int:
        return 2 * self._root

    @property
    def logits_backward(self) -> int:
        return 4 * self._layer if self.shard > 1 else 0

    @property
    def layer_backward(self) -> int:
        return 4 * self._layer if self.shard > 1 else 0

    @property
    def layer_reduce(self) -> int:
        """A layer's gradients reduced, its activations gone: sharded, the bf16 layer and gradient and
        the fp32 reduce-scatter input; on one GPU the fp32 copy, and an MoE layer's stacked experts'
        gradient written expert by expert into zero-filled copies of the whole weight."""
        if self.frozen:
            return 0
        if self.shard > 1:
            return 6 * self._layer
        experts = self.arch.params.experts // self.arch.moe_layers if self.arch.moe_layers else 0
        return 4 * self._layer + 4 * experts

    @property
    def root_backward(self) -> int:
        return 0 if self.frozen else 5 * self._root + 4 * self._root // self.shard

    @property
    def forward_start(self) -> int:
        """The first layer's unshard: the root gathered and its all-gather buffer not yet freed, the first
        layer's all-gather buffer and its copy-out (bf16 each)."""
        runs = self.arch.layer_runs()
        return 4 * self._root + 4 * (runs[0][1] if runs else 0) if self.shard > 1 else self.root

    @property
    def forward_gather(self) -> int:
        """A later layer's unshard: the root gathered, the previous layer's all-gather buffer, and this
        layer's buffer and copy-out (bf16 each); the largest over consecutive layers."""
        runs = self.arch.layer_runs()
        pairs = [6 * size for count, size in runs if count > 1]
        pairs += [2 * before + 4 * layer for (_, before), (_, layer) in pairwise(runs)]
        return self.root + max(pairs) if self.shard > 1 and pairs else 0

    @property
    def forward_layer(self) -> int:
        return self.root + (4 if self.shard > 1 else 2) * self._layer

    @property
    def forward_logits(self) -> int:
        return self.root + (2 * self._layer if self.shard > 1 else 0)


def _mlp_width(arch: Architecture) -> int:
    """The MLP width one token passes through in an average layer: the dense MLP's in a dense layer,
    the routed experts' (experts per token x their width) and the shared experts' in an MoE layer."""
    if not arch.moe_layers:
        return arch.intermediate
    moe = arch.experts_per_token * arch.expert_intermediate + arch.shared_intermediate
    dense_layers = arch.layers - arch.moe_layers
    return (arch.moe_layers * moe + dense_layers * arch.intermediate) // arch.layers


def _softcap_bytes(arch: Architecture) -> int:
    """Logit softcapping (`tanh(logits / cap) * cap`, out of place) keeps one more bf16 vocabulary-wide
    tensor per token beside the logits, in training and in a forward alike."""
    return 2 if arch.logit_softcapping else 0


def _saved_bytes_per_token(arch: Architecture) -> int:
    """What one decoder layer saves for backward per token under bf16 mixed precision with flash
    attention (measured against PyTorch's tracker, tests/memtracker): each RMSNorm its fp32 input,
    bf16 normalized and weighted outputs (8 x hidden, two norms), q and the attention output (4 x q),
    k and v (4 x kv), the fp32 log-sum-exp per head, the MLP's gate, up, activation and product
    (8 x its width), and Qwen3's q/k norms (6 x (q + kv))."""
    q, kv = arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    qk_norm = 6 * (q + kv) if FAMILIES[arch.model_type].qk_norm else 0
    return 16 * arch.hidden + 4 * q + 4 * kv + 4 * arch.heads + 8 * _mlp_width(arch) + qk_norm


def _forward_bytes_per_token(arch: Architecture) -> int:
    """The temporaries of one layer's forward without gradients, per token: the MLP's gate or
    activation, up and product at once (bf16), a norm's fp32 input and output, and in an MoE layer
    each routed expert's copies of the token and its output (8 x hidden; fitted to the tracker)."""
    routed = 8 * arch.hidden * arch.experts_per_token * arch.moe_layers // arch.layers
    return 6 * _mlp_width(arch) + 8 * arch.hidden + routed


def _backward_bytes_per_token(arch: Architecture) -> int:
    """The temporaries of one layer's backward per token: activation gradients (bf16) and the fp32
    norm gradients (measured, tests/memtracker)."""
    return 16 * arch.hidden + 4 * _mlp_width(arch)


def _reference(arch: Architecture, geo: Geometry, k: _Keys, seq: int, dev: Device) -> Row:
    """The reference's forward without gradients: its weights, and the largest of what its phases
    hold beside them (FSDP's gathered parameters at a layer's unshard; a layer's forward; the logits)."""
    p = arch.params.total
    fsdp: _FsdpPhases | None = None
    if geo.strategy == "megatron":
        m = _megatron(arch, k, "ref", geo.megatron_ref)
        weights_per_rank = 2 * m.shard
        tp, pp, cp = geo.megatron_ref
        shard = f"TP{tp} x PP{pp} x CP{cp} (EP{m.ep})"
    else:
        fsdp = _FsdpPhases(arch, _fsdp_shard(k, "ref", geo.ref_world))
        weights_per_rank = 2 * p / fsdp.shard
        shard = f"{fsdp.shard} GPUs"
    offload = bool(k("trainer.ref.fsdp_config.cpu_offload", False)) and geo.strategy != "megatron"
    weights = 0 if offload else int(weights_per_rank)
    micro_tokens = _micro_tokens(k, int(k("trainer.micro_forward_batch_size_per_gpu", 1)), seq)
    split = _token_split(geo, "ref", cpu=False)
    tokens = micro_tokens // split.activations
    residual = tokens * 2 * arch.hidden
    activations = residual + tokens * _forward_bytes_per_token(arch)
    logit_bytes = 4 if fsdp is None else 2 + _softcap_bytes(arch)
    logits = micro_tokens // split.logit_tokens * (arch.vocab // split.vocab) * logit_bytes
    start, gather, layer, last = (
        (0, 0, 0, 0)
        if fsdp is None
        else (fsdp.forward_start, fsdp.forward_gather, fsdp.forward_layer, fsdp.forward_logits)
    )
    # A later layer's unshard runs beside the previous layer's output and the embeddings' (the residual twice).
    transient = max(start + residual, gather + 2 * residual, layer + activations, last + logits + residual)
    return Row(
        "reference",
        "forward",
        weights + transient,
        dev.bytes,
        weights,
        f"bf16 weights {gib(weights)} GiB over {shard}{' (CPU offload)' if offload else ''}, forward of {tokens} tokens "
        f"(the largest of gathered parameters, a layer's forward {gib(activations)} and logits {gib(logits)} GiB)",
        parts=(
            ("weights", weights),
            ("gathered", max(start, gather, layer, last)),
            ("activations", activations),
            ("logits", logits),
        ),
    )


def engine_kv(arch: Architecture, geo: Geometry, composed: Mapping[str, Any], dev: Device) -> KvCapacity:
    """One rollout engine device: its utilization budget, weights, estimated overhead and KV cache."""
    k = _Keys(composed)
    seq = max_model_len(composed)
    tp, pp, dp, ep = geo.tp, geo.pp, geo.dp, geo.ep
    wbytes = DTYPE_BYTES.get(str(k("generator.inference_engine.model_dtype", "bfloat16")), 2)
    expert_shard = tp * dp if ep > 1 else tp
    widths = 1 if ep > 1 else tp  # expert parallelism keeps whole experts, TP splits each one's width
    dense, experts = arch.stored_bytes(wbytes, widths, hopper=dev.sm == 90)  # packed as quantization_config says
    weights = int((dense / tp + experts / expert_shard) / pp)
    util = float(k("generator.inference_engine.gpu_memory_utilization", 0.9))
    batched = int(k("generator.inference_engine.max_num_batched_tokens", 8192))
    seqs = int(k("generator.inference_engine.max_num_seqs", 256))
    graphs = 0 if k("generator.inference_engine.enforce_eager", False) else CUDA_GRAPHS
    return kv_capacity(
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
        overhead=profile_peak(arch, tp, batched, seqs) + graphs + NON_TORCH,
    )


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
        layers=math.ceil(arch.layers / pp),
        batched_tokens=batched_tokens,
        block=block,
    )


def kv_block_size(arch: Architecture, dev: Device) -> int:
    """Tokens per KV page: vLLM's 16, except multi-head latent attention on Hopper, whose default
    backend (FlashMLA) needs pages of 64 and vLLM raises the block size to it."""
    return FLASHMLA_BLOCK if arch.kv_latent and dev.sm == 90 else VLLM_BLOCK


def profile_peak(arch: Architecture, tp: int, batched: int, seqs: int) -> int:
    """What vLLM's profiling run peaks at beyond the weights (fit to published V0 logs, see
    tests/rules/test_memory_model.py): the larger of a forward over `max_num_batched_tokens` (the MLP's
    gate/up and activation over TP, two hidden-wide buffers) and the sampler's warm-up over
    `max_num_seqs` rows of the vocabulary (fp32 logits, probabilities, sorted values and int64 indices,
    log-probabilities: gathered, not sharded), which runs after the forward's activations are freed."""
    forward = batched * 2 * (3 * arch.mlp_width // max(1, tp) + 2 * arch.hidden)
    return max(forward, seqs * arch.vocab * 4 * SAMPLER_ROWS)


def kv_cache_bytes(k: _Keys, model_bytes: int) -> int:
    """Bytes a KV element takes: vLLM's `kv_cache_dtype`, whose `auto` is the model's activation dtype
    (`model_dtype`), whatever the checkpoint's weights are packed in; fp8* halves it."""
    kv_dtype = str(k("generator.inference_engine.engine_init_kwargs.kv_cache_dtype", "auto"))
    return 1 if kv_dtype.startswith("fp8") else DTYPE_BYTES.get(kv_dtype, model_bytes)


# --- the rules --------------------------------------------------------------------------------


def table_for(s: Subject, geo: Geometry, composed: Mapping[str, Any]) -> MemoryTable:
    """The memory table of the plan `s` describes (its `architecture` and its device), or why not."""
    arch = s.architecture
    if not isinstance(arch, Architecture):
        reason = (
            arch.reason
            if isinstance(arch, Unsized)
            else "the model's architecture is not known (no config.json facts recorded)"
        )
        return MemoryTable(None, unsized=(f"cannot size the model: {reason}",))
    cpu = s.profile.capabilities.accelerator == "cpu"
    dev = host_slot(s.host_memory_bytes, s.gpus_per_node) if cpu else device(s.gpu_variant)
    if dev is None:
        what = (
            "host memory per CPU slot is not known (no allocation)"
            if cpu
            else f"gpu_variant {s.gpu_variant!r} is not in the device table"
        )
        return MemoryTable(None, unsized=(f"cannot size the device: {what}",))
    return estimate(arch, geo, composed, dev, cpu=cpu)


def memory_rules(s: Subject, geo: Geometry, composed: Mapping[str, Any]) -> list[Violation]:
    """The certain failures of `table_for(s, ...)`: each a lower bound beyond the device."""
    return violations(table_for(s, geo, composed), s, geo)


def violations(table: MemoryTable, s: Subject, geo: Geometry) -> list[Violation]:
    """One violation per certain failure; a refused engine's weights hide its KV row (same cause)."""
    refused = [r for r in table.rows if r.status == "REFUSED"]
    where = table.device.name if table.device is not None else s.gpu_variant
    out = []
    states = [r for r in refused if r.role != "rollout"]
    if states:
        r = max(states, key=lambda row: row.certain)
        role = {"reference": "ref", "critic": "critic"}.get(r.role, "policy")
        out.append(
            violation(
                "memory.model_states",
                [
                    "role_plan.critic.num_nodes" if role == "critic" else "role_plan.policy_num_nodes",
                    "topology.gpu_variant",
                    f"config_yaml.trainer.{role}.fsdp_config.cpu_offload",
                ],
                f"{r.role} {r.phase}: the model states alone need at least {gib(r.certain)} GiB per device "
                f"({r.detail}) but one {where} has {gib(r.capacity)} GiB",
                f"shard over more GPUs (more {'critic' if role == 'critic' else 'policy'} nodes), "
                f"set trainer.{role}.fsdp_config.cpu_offload=true, train LoRA adapters, or use a larger GPU",
                need_gib=gib(r.certain),
                capacity_gib=gib(r.capacity),
            )
        )
    weights = [r for r in refused if r.phase == "engine weights"]
    for r in weights:
        need_tp = math.ceil(r.certain * geo.tp / max(1, r.capacity))
        wider = wider_engines(s, geo, need_tp)
        tp_fix = (
            f"set inference_engine_tensor_parallel_size={wider[0]} and num_inference_engines={wider[1]} (the "
            f"smallest TP of at least {need_tp} that divides the model's heads and fills a node)"
            if wider
            else f"no engine TP of at least {need_tp} divides the model's heads and fills a node: use a larger GPU"
        )
        out.append(
            violation(
                "memory.engine_weights",
                [
                    "role_plan.inference_engine_tensor_parallel_size",
                    "config_yaml.generator.inference_engine.gpu_memory_utilization",
                ],
                f"a rollout engine's weights need {gib(r.certain)} GiB per device ({r.detail}) but its "
                f"gpu_memory_utilization budget on one {where} is {gib(r.capacity)} GiB",
                f"{tp_fix}, or raise generator.inference_engine.gpu_memory_utilization",
                need_gib=gib(r.certain),
                budget_gib=gib(r.capacity),
            )
        )
    kv = table.kv
    if kv is not None and not weights and any(r.phase == "KV of one sequence" for r in refused):
        one = kv.one_sequence
        fits = kv_tokens(kv.upper, kv.bytes_per_token, kv.block)
        out.append(
            violation(
                "memory.kv_one_sequence",
                [
                    "config_yaml.trainer.max_prompt_length",
                    "config_yaml.generator.sampling_params.max_generate_length",
                    "config_yaml.generator.inference_engine.gpu_memory_utilization",
                ],
                f"one {kv.max_model_len}-token sequence needs {gib(one)} GiB of KV cache per device "
                f"({kv.bytes_per_token} B/token) but the engine's budget of {gib(kv.budget)} GiB leaves at most "
                f"{gib(kv.upper)} GiB after {gib(kv.weights)} GiB of weights: vLLM refuses to start",
                f"shorten max_prompt_length + max_generate_length to at most {fits} tokens, raise "
                "gpu_memory_utilization, or raise the engine's tensor parallel size",
                need_gib=gib(one),
                available_gib=gib(kv.upper),
            )
        )
    return out
