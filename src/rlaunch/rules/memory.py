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

* training (FSDP): model states sharded over the FSDP group (fp32 parameters, fp32 gradients and
  two fp32 Adam moments: 16 bytes a parameter; 12 of them certain; none with `cpu_offload`; bf16
  weights only with LoRA), one gathered layer or the embedding in bf16, the activations of one
  micro batch at the maximum sequence length (the layer inputs with gradient checkpointing, every
  layer's activations without), and the fp32 logits `[tokens x vocab]`. Megatron: bf16 weights and
  fp32 gradients over TP x PP (experts over EP x ETP x PP), the distributed optimizer's 12 bytes a
  parameter over data parallelism as well, activations and logits over TP x CP;
* critic (when the role plan has one): the training rows of the policy's model with a value head
  for its LM head (one fp32 value a token, no vocabulary logits), sharded over the critic's GPUs;
* reference: bf16 weights over its FSDP group (resident beside the policy unless fully
  colocated, when SkyRL offloads it between uses), one forward micro batch;
* rollout (vLLM): weights per TP x PP shard (experts over EP when EP > 1), the budget
  `gpu_memory_utilization x capacity`, an estimate of the profiling peak, CUDA graphs and
  non-torch memory, and the KV cache that is left: tokens and maximum-length sequences
  (`max_model_len` = SkyRL's `max_input_length + max_generate_length`);
* colocated: the training bar (the policy's step while the engine sleeps) and the generation bar
  (the engine's budget while the policy is offloaded).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch.dotted import get_path
from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules.architecture import DTYPE_BYTES, Architecture, Unsized
from rlaunch.rules.devices import GIB, Device, device, host_slot
from rlaunch.rules.subject import Subject, Violation, violation

TIGHT_MARGIN = 0.10  # an estimate above 90 % of capacity is tight
VLLM_BLOCK = 16  # tokens per KV block (vLLM's default block size)
CUDA_GRAPHS = int(0.5 * GIB)  # vLLM's captured graphs, when not in eager mode (estimate)
NON_TORCH = int(0.5 * GIB)  # CUDA context, NCCL buffers (estimate)
FSDP_STATE_BYTES, FSDP_CERTAIN_BYTES = 16, 12
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
    bytes_per_token: int  # per device
    max_model_len: int
    window: int | None = None  # sliding-window attention: a sequence never holds more KV than this

    @property
    def one_sequence(self) -> int:
        """KV bytes one maximum-length sequence needs on one device."""
        return self.bytes_per_token * min(self.max_model_len, self.window or self.max_model_len)

    @property
    def upper(self) -> int:
        """KV bytes left with no overhead at all: what the engine can never exceed."""
        return self.budget - self.weights

    @property
    def available(self) -> int:
        return self.budget - self.weights - self.overhead

    @property
    def tokens(self) -> int:
        return kv_tokens(self.available, self.bytes_per_token)

    @property
    def sequences(self) -> float:
        return self.tokens / self.max_model_len if self.max_model_len else 0.0


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
    the KV heads replicates them)."""
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
    arch: Architecture, geo: Geometry, composed: Mapping[str, Any], dev: Device, *, accelerator: str = "gpu"
) -> MemoryTable:
    """The memory table of one plan on `dev` (see the module docstring)."""
    k = _Keys(composed)
    seq = max_model_len(composed)
    rows: list[Row] = []
    train = _training(arch, geo, k, seq, dev, "policy", cpu=accelerator == "cpu")
    ref = _reference(arch, geo, k, seq, dev) if geo.use_reference else None
    if accelerator == "cpu":
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
            )
        )
        if ref is not None:
            rows.append(ref)
        rows += engine_rows
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


def _lora(k: _Keys, role: str) -> bool:
    return int(k(f"trainer.{role}.model.lora.rank", 0) or 0) > 0


def _training(arch: Architecture, geo: Geometry, k: _Keys, seq: int, dev: Device, role: str, *, cpu: bool) -> _Training:
    """The policy's (or the critic's) training rows. The critic is the policy's model with a value
    head (hidden -> 1) for its LM head, trained on its own GPUs: one fp32 value a token, no vocabulary."""
    critic = role == "critic"
    p = arch.params.total - arch.params.lm_head + arch.hidden if critic else arch.params.total
    world, vocab = (geo.critic_world, 1) if critic else (geo.policy_world, arch.vocab)
    micro = int(k("trainer.micro_train_batch_size_per_gpu", geo.micro_batch))
    budget_tokens = int(k("trainer.max_tokens_per_microbatch", -1))
    checkpointing = bool(k("trainer.gradient_checkpointing", True))
    if geo.strategy == "megatron" and not cpu:
        tp, pp, cp = geo.megatron_policy
        ep = int(k(f"trainer.{role}.megatron_config.expert_model_parallel_size", 1))
        etp = int(k(f"trainer.{role}.megatron_config.expert_tensor_parallel_size", tp))
        dense, experts = p - arch.params.experts, arch.params.experts
        model_shard = dense / (tp * pp) + experts / (ep * etp * pp)
        dp = max(1, world // (tp * pp * cp))
        optimizer = (
            0
            if k(f"trainer.{role}.megatron_config.optimizer_config_kwargs.optimizer_cpu_offload", False)
            else 12 * model_shard / dp
        )
        states = int(6 * model_shard + optimizer) if not _lora(k, role) else int(2 * model_shard)
        certain = int(2 * model_shard + optimizer) if not _lora(k, role) else int(2 * model_shard)
        how = f"Megatron TP{tp} x PP{pp} x CP{cp} (EP{ep}), distributed optimizer over DP{dp}"
        shard_tokens = tp * cp
        gathered = 0
        layers = math.ceil(arch.layers / pp)
    else:
        shard = 1 if cpu else _fsdp_shard(k, role, world)
        offload = not cpu and bool(k(f"trainer.{role}.fsdp_config.cpu_offload", False))
        per_param, certain_per_param = (2, 2) if _lora(k, role) else (FSDP_STATE_BYTES, FSDP_CERTAIN_BYTES)
        states = 0 if offload else p * per_param // shard
        certain = 0 if offload else p * certain_per_param // shard
        how = ("one full replica per slot" if cpu else f"FSDP over {shard} GPUs") + (", CPU offload" if offload else "")
        shard_tokens = max(1, (geo.critic_sp if critic else geo.policy_sp) or 1)
        gathered = 0 if cpu else 2 * max(arch.layer_params(), arch.vocab * arch.hidden)
        layers = arch.layers
    tokens = (budget_tokens if budget_tokens > 0 else micro * seq) // max(1, shard_tokens)
    per_token = _activation_bytes_per_token(arch)
    kept = layers * tokens * arch.hidden * 2 + tokens * per_token if checkpointing else layers * tokens * per_token
    logits = tokens * vocab * 4 // (geo.megatron_policy[0] if geo.strategy == "megatron" else 1)
    step = states + gathered + kept + logits
    detail = (
        f"states {gib(states)} ({how}) + gathered {gib(gathered)} + activations {gib(kept)} "
        f"({tokens} tokens/micro batch, checkpointing {'on' if checkpointing else 'off'}) + fp32 logits {gib(logits)} GiB"
    )
    return _Training(
        Row(role, "model states", states, dev.bytes, certain, how),
        Row(role, "training step", step, dev.bytes, certain, detail),
    )


def _fsdp_shard(k: _Keys, role: str, world: int) -> int:
    size = int(k(f"trainer.{role}.fsdp_config.fsdp_size", -1))
    return size if 0 < size <= world else max(1, world)


def _activation_bytes_per_token(arch: Architecture) -> int:
    """bf16 activations one layer keeps for backward, per token (flash attention: no score matrix)."""
    q, kv = arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    mlp = arch.intermediate * max(1, arch.experts_per_token)
    return 2 * (5 * arch.hidden + q + 2 * kv + q + 4 * mlp)


def _reference(arch: Architecture, geo: Geometry, k: _Keys, seq: int, dev: Device) -> Row:
    p = arch.params.total
    if geo.strategy == "megatron":
        tp, pp, _ = geo.megatron_ref
        shard = tp * pp
    else:
        shard = _fsdp_shard(k, "ref", geo.ref_world)
    offload = bool(k("trainer.ref.fsdp_config.cpu_offload", False)) and geo.strategy != "megatron"
    weights = 0 if offload else 2 * p // shard
    micro = int(k("trainer.micro_forward_batch_size_per_gpu", 1))
    tokens = micro * seq // max(1, geo.ref_sp or 1)
    transient = tokens * _activation_bytes_per_token(arch) + tokens * arch.hidden * 2 + tokens * arch.vocab * 4
    gathered = 2 * max(arch.layer_params(), arch.vocab * arch.hidden)
    return Row(
        "reference",
        "forward",
        weights + gathered + transient,
        dev.bytes,
        weights,
        f"bf16 weights {gib(weights)} GiB over {shard} GPUs{' (CPU offload)' if offload else ''}, forward of {tokens} tokens",
    )


def engine_kv(arch: Architecture, geo: Geometry, composed: Mapping[str, Any], dev: Device) -> KvCapacity:
    """One rollout engine device: its utilization budget, weights, estimated overhead and KV cache."""
    k = _Keys(composed)
    seq = max_model_len(composed)
    tp, pp, dp, ep = geo.tp, geo.pp, geo.dp, geo.ep
    wbytes = DTYPE_BYTES.get(str(k("generator.inference_engine.model_dtype", "bfloat16")), 2)
    experts = arch.params.experts
    expert_shard = tp * dp if ep > 1 else tp
    weights = int(wbytes * ((arch.params.total - experts) / tp + experts / expert_shard) / pp)
    util = float(k("generator.inference_engine.gpu_memory_utilization", 0.9))
    kv_dtype = str(k("generator.inference_engine.engine_init_kwargs.kv_cache_dtype", "auto"))
    kv_bytes = DTYPE_BYTES.get(kv_dtype, wbytes)
    per_token = kv_bytes_per_token(arch, tp, pp, kv_bytes)
    batched = int(k("generator.inference_engine.max_num_batched_tokens", 8192))
    seqs = int(k("generator.inference_engine.max_num_seqs", 256))
    profile_peak = batched * _activation_bytes_per_token(arch) // tp // 2 + seqs * arch.vocab * 4 // tp
    graphs = 0 if k("generator.inference_engine.enforce_eager", False) else CUDA_GRAPHS
    return KvCapacity(
        device=dev.bytes,
        budget=int(util * dev.bytes),
        weights=weights,
        overhead=profile_peak + graphs + NON_TORCH,
        bytes_per_token=per_token,
        max_model_len=seq,
        window=arch.sliding_window,
    )


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
    return estimate(arch, geo, composed, dev, accelerator="cpu" if cpu else "gpu")


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
        out.append(
            violation(
                "memory.engine_weights",
                [
                    "role_plan.inference_engine_tensor_parallel_size",
                    "config_yaml.generator.inference_engine.gpu_memory_utilization",
                ],
                f"a rollout engine's weights need {gib(r.certain)} GiB per device ({r.detail}) but its "
                f"gpu_memory_utilization budget on one {where} is {gib(r.capacity)} GiB",
                f"raise inference_engine_tensor_parallel_size to at least {need_tp}, or raise "
                "generator.inference_engine.gpu_memory_utilization",
                need_gib=gib(r.certain),
                budget_gib=gib(r.capacity),
            )
        )
    kv = table.kv
    if kv is not None and not weights and any(r.phase == "KV of one sequence" for r in refused):
        one = kv.one_sequence
        fits = kv_tokens(kv.upper, kv.bytes_per_token)
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
