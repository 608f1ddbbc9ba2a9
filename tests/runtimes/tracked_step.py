"""Run in the trl-cpu runtime's venv (torch + transformers; the launcher side never imports them).

PyTorch's own accounting of one SkyRL FSDP2 training step and one reference forward, allocating
nothing: the model is transformers' real class built from a config (no download) under
`FakeTensorMode`, sharded with FSDP2 over a fake process group of `world` ranks, and measured by
`torch.distributed._tools.fsdp2_mem_tracker.FSDPMemTracker`. It is held as SkyRL's FSDP worker
holds it: fp32 master weights, `MixedPrecisionPolicy(bf16 params, fp32 reduce)`, AdamW built as
SkyRL builds it (foreach, as on CUDA), HF gradient checkpointing (non-reentrant) on or off, packed
micro batches (one row of `micro x seq` tokens with restarting positions, no attention mask, as
`use_sample_packing` lays them out), the bf16 logits divided by the temperature in place, and the
log-probs of flash-attn's cross entropy with `inplace_backward=True`: its kernel allocates only its
per-token outputs and writes the logits' gradient into the logits. Attention is CPU flash attention
(saves q, k, v, out and the log-sum-exp, no score matrix), like flash-attn's varlen kernel; MLA's
values are padded to the q/k head width as transformers does for flash-attn. A vision-language model
is built whole (`AutoModelForImageTextToText`) and fed text tokens; Kimi-K2 as DeepSeek-V3.

Steady state: a warm-up step creates Adam's moments; the measured step runs two micro batches
(gradient accumulation: the first's gradients are alive during the second) and the optimizer
step, with the peak taken per phase: forward/backward, then the optimizer step.

Reads a JSON list of cases on stdin ({"config": config.json dict, "world", "micro", "seq",
"checkpointing"}); prints per case {"train_fb", "train_opt", "reference"} peak bytes per rank,
and the tracker's breakdown by category at the forward/backward peak, as JSON on stdout.
"""

from __future__ import annotations

import json
import sys

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.testing._internal.distributed.fake_pg import FakeStore
from transformers import AttentionInterface, AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText
from transformers.masking_utils import AttentionMaskInterface

ATTENTION = "rlaunch_varlen_cpu"


def flash_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **_):
    """flash-attn's memory: q, k, v, the output and its log-sum-exp saved, no [seq x seq] scores, the
    KV heads read in place (grouped-query attention)."""
    width = value.shape[-1]
    if width != query.shape[-1]:  # MLA: flash-attn takes one head dim, so V is padded to q/k's and cut after
        value = torch.nn.functional.pad(value, (0, query.shape[-1] - width))
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, is_causal=True, scale=scaling, enable_gqa=True
    )
    return out[..., :width].transpose(1, 2).contiguous(), None


AttentionInterface.register(ATTENTION, flash_attention)
AttentionMaskInterface.register(ATTENTION, lambda *args, **kwargs: None)


class InplaceCrossEntropy(torch.autograd.Function):
    """flash-attn's `cross_entropy_loss(logits, labels, inplace_backward=True)`: the fused kernel's
    outputs are per token; its backward writes d(logits) into the logits' own storage."""

    @staticmethod
    def forward(ctx, logits, labels):
        ctx.save_for_backward(logits)
        return torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)

    @staticmethod
    def backward(ctx, grad):
        (logits,) = ctx.saved_tensors
        return logits, None


BUILT_AS = {"kimi_k2": "deepseek_v3"}  # Kimi-K2's remote code is DeepSeek-V3's architecture


def model_of(config: dict, dtype: torch.dtype):
    """transformers' own class for the config; a vision-language model whole (vision tower included:
    its weights train with the rest), fed text tokens only."""
    config = {**config, "model_type": BUILT_AS.get(config["model_type"], config["model_type"])}
    cfg = AutoConfig.for_model(**config)
    auto = AutoModelForImageTextToText if "vision_config" in config else AutoModelForCausalLM
    model = auto.from_config(cfg, dtype=dtype, attn_implementation=ATTENTION)
    for param in model.parameters():  # those transformers keeps in fp32 follow the rest: FSDP2 needs one dtype
        if param.dtype != dtype:
            param.data = param.data.to(dtype)
    return model


def shard(model, mesh) -> None:
    """SkyRL's `apply_fsdp2`: each decoder layer, then the whole model (a vision tower, which text
    tokens never run, stays in the root's group: FSDP2 cannot reshard a group that never gathered)."""
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, cast_forward_inputs=True)
    for layer in model.get_decoder().layers:
        fully_shard(layer, mesh=mesh, mp_policy=mp)
    fully_shard(model, mesh=mesh, mp_policy=mp)


def packed(micro: int, seq: int, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(0, vocab, (1, micro * seq))
    return ids, torch.arange(seq).repeat(micro)[None]


def log_probs(model, ids, positions):
    logits = model(ids, position_ids=positions).logits
    logits.div_(1.0)  # SkyRL divides by the temperature in place
    flat = logits.reshape(-1, logits.shape[-1])
    return -InplaceCrossEntropy.apply(flat, torch.roll(ids, -1, 1).reshape(-1))


def total(snapshot) -> int:
    return max(dev["Total"] for dev in snapshot.values())


def breakdown(snapshot) -> dict[str, int]:
    return {k: v for dev in snapshot.values() for k, v in dev.items() if v}


def reset_peak(tracker: FSDPMemTracker) -> None:
    """Start a new phase: the tracker's peak becomes what is allocated now (private fields: the
    tracker resets its peak only on entry)."""
    tracker._peak_mem_snap = tracker.get_tracker_snapshot()
    tracker._peak_mem = {dev: snap["Total"] for dev, snap in tracker._peak_mem_snap.items()}


def training(case: dict, mesh) -> dict:
    model = model_of(case["config"], torch.float32)
    if case["checkpointing"]:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    shard(model, mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01, foreach=True)
    ids, positions = packed(case["micro"], case["seq"], case["config"]["vocab_size"])
    tracker = FSDPMemTracker(model, optimizer)
    tracker.track_inputs((ids, positions))
    out: dict = {}
    with tracker:
        for measured in (False, True):
            reset_peak(tracker)
            for _ in range(2):
                tracker.reset_mod_stats()
                loss = (log_probs(model, ids, positions) * 0.5).mean()
                if measured:
                    out["forward_end"] = breakdown(tracker.get_tracker_snapshot())
                loss.backward()
            if measured:
                peak = tracker.get_tracker_snapshot("peak")
                out["train_fb"] = total(peak)
                out["breakdown"] = breakdown(peak)
            reset_peak(tracker)
            optimizer.step()
            optimizer.zero_grad()
            if measured:
                out["train_opt"] = total(tracker.get_tracker_snapshot("peak"))
    return out


def reference(case: dict, mesh) -> dict[str, int]:
    model = model_of(case["config"], torch.bfloat16)
    model.config.use_cache = False
    shard(model, mesh)
    ids, positions = packed(case["micro"], case["seq"], case["config"]["vocab_size"])
    tracker = FSDPMemTracker(model)
    tracker.track_inputs((ids, positions))
    with tracker, torch.no_grad():
        log_probs(model, ids, positions)
        return breakdown(tracker.get_tracker_snapshot("peak"))


def main() -> None:
    cases = json.load(sys.stdin)
    worlds = {case["world"] for case in cases}
    (world,) = worlds
    dist.init_process_group("fake", rank=0, world_size=world, store=FakeStore())
    mesh = init_device_mesh("cpu", (world,))
    results = []
    for case in cases:
        print(case["config"]["model_type"], file=sys.stderr, flush=True)
        with FakeTensorMode():
            measured = training(case, mesh)
            measured["reference_breakdown"] = reference(case, mesh)
            measured["reference"] = measured["reference_breakdown"]["Total"]
        results.append(measured)
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
