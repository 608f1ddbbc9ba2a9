"""The training roles' memory: the policy's and the critic's model states and training step (FSDP2
or Megatron), and the reference's forward (see the package's docstring)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

from rlaunch.launch_config.geometry import Geometry
from rlaunch.launch_config.recipe_keys import ROLE, TRAINER, role_key
from rlaunch.rules.devices import Device
from rlaunch.rules.memory.rows import Keys, Row, gib
from rlaunch.rules.model_shape import Architecture

FSDP_STATE_BYTES, FSDP_CERTAIN_BYTES = 16, 12
ADAM_STEP_BYTES = 4  # foreach AdamW's fp32 temporary per parameter (sqrt of the second moment)


@dataclass(frozen=True)
class TrainingRows:
    states: Row
    step: Row
    resident: int  # the policy's weights on one device while a colocated engine wakes (optimizer offloaded)


def _lora(k: Keys, role: str) -> bool:
    return int(k(role_key(role, ROLE.LORA_RANK), 0) or 0) > 0


def training_rows(
    arch: Architecture, geo: Geometry, k: Keys, seq: int, dev: Device, role: str, *, cpu: bool
) -> TrainingRows:
    """The policy's (or the critic's) training rows. The critic is the policy's model with a value
    head (hidden -> 1) for its LM head, trained on its own GPUs: one fp32 value a token, no vocabulary."""
    critic = role == "critic"
    p = arch.params.total - arch.params.lm_head + arch.hidden if critic else arch.params.total
    world, vocab = (geo.critic_world, 1) if critic else (geo.policy_world, arch.vocab)
    micro = int(k(TRAINER.MICRO_TRAIN_BATCH_SIZE_PER_GPU, geo.micro_batch))
    checkpointing = bool(k(TRAINER.GRADIENT_CHECKPOINTING, True))
    if geo.strategy == "megatron" and not cpu:
        m = _megatron(arch, k, role, geo.megatron_policy)
        tp, pp, cp = geo.megatron_policy
        dense_dp = max(1, world // (tp * pp * cp))
        expert_dp = max(1, world // (m.ep * m.etp * pp))
        optimizer = (
            0
            if k(role_key(role, ROLE.MEGATRON_OPTIMIZER_CPU_OFFLOAD), False)
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
        offload = not cpu and bool(k(role_key(role, ROLE.FSDP_CPU_OFFLOAD), False))
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
        if k(TRAINER.REMOVE_MICROBATCH_PADDING, True)
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
    return TrainingRows(
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


def _megatron(arch: Architecture, k: Keys, role: str, sizes: tuple[int, int, int]) -> _MegatronShard:
    tp, pp, _ = sizes
    ep = int(k(role_key(role, ROLE.MEGATRON_EXPERT_PARALLEL), 1))
    etp = int(k(role_key(role, ROLE.MEGATRON_EXPERT_TENSOR_PARALLEL), tp))
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


def _micro_tokens(k: Keys, micro: int, seq: int) -> int:
    """Tokens of one micro batch at most: `micro` sequences of `seq`, or SkyRL's token budget
    (`max_tokens_per_microbatch`), which a single longer sequence still exceeds alone."""
    budget = int(k(TRAINER.MAX_TOKENS_PER_MICROBATCH, -1))
    return max(budget, seq) if budget > 0 else micro * seq


def _fsdp_shard(k: Keys, role: str, world: int) -> int:
    size = int(k(role_key(role, ROLE.FSDP_SIZE), -1))
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
    qk_norm = 6 * (q + kv) if arch.qk_norm else 0
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


def reference_row(arch: Architecture, geo: Geometry, k: Keys, seq: int, dev: Device) -> Row:
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
    offload = bool(k(role_key("ref", ROLE.FSDP_CPU_OFFLOAD), False)) and geo.strategy != "megatron"
    weights = 0 if offload else int(weights_per_rank)
    micro_tokens = _micro_tokens(k, int(k(TRAINER.MICRO_FORWARD_BATCH_SIZE_PER_GPU, 1)), seq)
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
