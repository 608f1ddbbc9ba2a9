"""Training steps on a real GPU: `torch.cuda.max_memory_allocated` beside the memory model's rows.

    # on a machine with a CUDA torch and transformers (the lent GPU): measure the grid, write JSON
    PYTHONPATH=src python benchmarks/memory_fit.py measure --out memory_fit_gpu.json
    # anywhere (no torch): each measured case beside `rlaunch.rules.memory`'s estimate of it
    PYTHONPATH=src python3 benchmarks/memory_fit.py compare benchmarks/memory_fit_h200.json

`measure` builds transformers' real model classes from configs written here (no download) and
holds them as SkyRL's FSDP policy does on one GPU: fp32 master weights sharded by FSDP2
(`fully_shard` per decoder layer and at the root, world size 1) with bf16 parameters for compute
and fp32 gradient reduction, AdamW, gradient checkpointing on and off. The loss takes fp32
log-probabilities of the sampled tokens from the logits (`log_softmax(logits.float())` gathered,
SkyRL's path without flash-attn's fused cross entropy). Each case runs two steps and records the
second (Adam's moments exist by then): the forward/backward peak and the optimizer-step peak apart,
and the model states resident before the step. A reference case is a no-grad bf16 forward with the
same log-probabilities. It also says whether vLLM is importable (its KV numbers need it).

`compare` reads such a file and prints each case's measured peak beside the estimate of the same
plan on one GPU (the policy's training step, the reference forward), with the relative error. The
measured JSON is kept in the repository (`memory_fit_h200.json`) so the comparison reruns on every
change of the model without a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

GIB = 2**30

FAMILIES: dict[str, dict[str, Any]] = {
    # A Qwen2-0.5B-like shape (the script's original case).
    "qwen2": {
        "model_type": "qwen2",
        "hidden_size": 1024,
        "intermediate_size": 2816,
        "num_hidden_layers": 12,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "vocab_size": 32000,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
    },
    # Qwen3-0.6B's shape (its 151936-token vocabulary makes the logits term dominate), 8 of 28 layers.
    "qwen3": {
        "model_type": "qwen3",
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 151936,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
    },
    # A Llama shape with wide layers (TinyLlama-1.1B's width, 8 of 22 layers, full multi-head KV).
    "llama": {
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 8,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "vocab_size": 32000,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
    },
    # Qwen2.5-1.5B's shape, 8 of 28 layers.
    "qwen2.5-1.5b": {
        "model_type": "qwen2",
        "hidden_size": 1536,
        "intermediate_size": 8960,
        "num_hidden_layers": 8,
        "num_attention_heads": 12,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": True,
    },
    # A small Qwen3-MoE: the config carries the dense intermediate_size beside moe_intermediate_size.
    "qwen3_moe": {
        "model_type": "qwen3_moe",
        "hidden_size": 1024,
        "intermediate_size": 3072,
        "moe_intermediate_size": 384,
        "num_experts": 16,
        "num_experts_per_tok": 4,
        "num_hidden_layers": 4,
        "num_attention_heads": 16,
        "num_key_value_heads": 4,
        "head_dim": 64,
        "vocab_size": 32000,
        "max_position_embeddings": 8192,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": True,
        "tie_word_embeddings": False,
    },
}
TRAIN_GRID = [(micro, seq, ckpt) for micro in (1, 4) for seq in (1024, 4096) for ckpt in (True, False)]
REFERENCE_GRID = [(micro, seq) for micro in (1, 4) for seq in (1024, 4096)]


# --- measure (needs torch with CUDA and transformers) -----------------------------------------


def _model(config: dict[str, Any], dtype: Any, device: str) -> Any:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    hf = AutoConfig.for_model(**config)
    hf._attn_implementation = "sdpa"
    with torch.device(device):
        return AutoModelForCausalLM.from_config(hf, dtype=dtype)


LOSSES = {
    "inplace": "SkyRL's path with flash-attn: the logits divided by the temperature in place, then a "
    "cross entropy that keeps the bf16 logits and one fp32 log-sum-exp a token and writes its gradient "
    "into the logits (rows in chunks of 128: no vocabulary-wide fp32 tensor)",
    "log_softmax": "HF's plain path: fp32 log_softmax of the whole logits, gathered at the sampled tokens",
}
_LOSS = "inplace"
_ROWS = 128  # rows of the logits an fp32 temporary covers at once (the fused kernel keeps none)


def _inplace_logprobs() -> Any:
    """An autograd function with the memory behaviour of flash-attn's fused cross entropy
    (`inplace_backward=True`), written here: forward saves the logits and an fp32 log-sum-exp per
    row; backward writes d(logprob)/d(logits) into the saved logits and returns them."""
    import torch

    class InplaceLogprob(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, logits: Any, labels: Any) -> Any:
            lse = torch.empty(logits.shape[0], dtype=torch.float32, device=logits.device)
            for i in range(0, logits.shape[0], _ROWS):
                lse[i : i + _ROWS] = torch.logsumexp(logits[i : i + _ROWS].float(), dim=-1)
            ctx.save_for_backward(logits, labels, lse)
            return logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1).float() - lse

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            logits, labels, lse = ctx.saved_tensors
            for i in range(0, logits.shape[0], _ROWS):
                rows = logits[i : i + _ROWS]
                g = -torch.exp(rows.float() - lse[i : i + _ROWS, None]) * grad[i : i + _ROWS, None]
                g.scatter_add_(1, labels[i : i + _ROWS, None], grad[i : i + _ROWS, None])
                rows.copy_(g)
            return logits, None

    return InplaceLogprob


def _logprobs(logits: Any, ids: Any) -> Any:
    import torch

    if _LOSS == "log_softmax":
        return torch.log_softmax(logits.float(), dim=-1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    flat = logits.view(-1, logits.shape[-1])
    if torch.is_grad_enabled():
        flat.div_(1.0)  # SkyRL divides by the temperature in place (an autograd node of its own)
    return _inplace_logprobs().apply(flat, ids.reshape(-1))


def _shard(model: Any) -> None:
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)


def _train_case(name: str, micro: int, seq: int, ckpt: bool, device: str) -> dict[str, Any]:
    import torch

    config = FAMILIES[name]
    model = _model(config, torch.float32, device)
    if ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    _shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    ids = torch.randint(0, config["vocab_size"], (micro, seq), device=device)
    phases: dict[str, int] = {}
    for _ in range(2):
        optimizer.zero_grad(set_to_none=True)
        _sync(device)
        phases["resident"] = _allocated(device)
        _reset(device)
        loss = -_logprobs(model(input_ids=ids, use_cache=False).logits, ids).mean()
        loss.backward()
        del loss
        _sync(device)
        phases["forward_backward"] = _peak(device)
        _reset(device)
        optimizer.step()
        _sync(device)
        phases["optimizer"] = _peak(device)
    params = sum(p.numel() for p in model.parameters())
    del model, optimizer
    return {
        "kind": "training",
        "params": params,
        **phases,
        "peak": max(phases["forward_backward"], phases["optimizer"]),
    }


def _reference_case(name: str, micro: int, seq: int, device: str) -> dict[str, Any]:
    import torch

    config = FAMILIES[name]
    model = _model(config, torch.bfloat16, device)
    ids = torch.randint(0, config["vocab_size"], (micro, seq), device=device)
    _sync(device)
    resident = _allocated(device)
    _reset(device)
    with torch.no_grad():
        _logprobs(model(input_ids=ids, use_cache=False).logits, ids)
    _sync(device)
    peak = _peak(device)
    params = sum(p.numel() for p in model.parameters())
    del model
    return {"kind": "reference", "params": params, "resident": resident, "peak": peak}


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _allocated(device: str) -> int:
    import torch

    return torch.cuda.memory_allocated() if device == "cuda" else 0


def _peak(device: str) -> int:
    import torch

    return torch.cuda.max_memory_allocated() if device == "cuda" else 0


def _reset(device: str) -> None:
    import gc

    import torch

    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def measure(out: str, budget_s: float, device: str, families: list[str]) -> int:
    import importlib.util
    import os

    import torch
    import torch.distributed as dist
    import transformers

    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: nothing measured")
        return 0
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=0, world_size=1)
    if device == "cuda":
        torch.cuda.set_device(0)
    header = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu (dry run of the script)",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "vllm": "installed" if importlib.util.find_spec("vllm") else "not installed on this machine",
        "loss": LOSSES[_LOSS],
        "setup": "FSDP2 fully_shard per layer and root, world 1, bf16 params, fp32 reduce; AdamW; step 2 recorded",
    }
    print(json.dumps(header))
    cases: list[dict[str, Any]] = []
    start = time.monotonic()
    plan = [("training", n, m, s, c) for n in families for m, s, c in TRAIN_GRID]
    plan += [("reference", n, m, s, None) for n in families for m, s in REFERENCE_GRID]
    for kind, name, micro, seq, ckpt in plan:
        if time.monotonic() - start > budget_s:
            print(f"time budget of {budget_s:.0f} s spent: {len(plan) - len(cases)} cases left unmeasured")
            break
        case = {"family": name, "micro": micro, "seq": seq, "checkpointing": ckpt}
        t0 = time.monotonic()
        try:
            if kind == "training":
                case |= _train_case(name, micro, seq, bool(ckpt), device)
            else:
                case |= _reference_case(name, micro, seq, device)
        except Exception as exc:  # one failing case must not lose the grid
            case |= {"kind": kind, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        case["seconds"] = round(time.monotonic() - t0, 2)
        cases.append(case)
        print(json.dumps(case), flush=True)
        _reset(device)
    dist.destroy_process_group()
    with open(out, "w") as f:
        json.dump({**header, "cases": cases}, f, indent=1)
    print(f"wrote {len(cases)} cases to {out}")
    return 0


# --- compare (pure: rlaunch's memory model only) ----------------------------------------------


def estimate(case: dict[str, Any]) -> int:
    """The memory model's bytes for a measured case on one GPU (H200): the policy's training step
    with the engine asleep, or the reference's forward."""
    from rlaunch.skyrl import ModelFacts, SkyRLRolePlan, SkyRLTopology
    from rlaunch.skyrl.views.memory_fit import memory_report

    seq, micro = case["seq"], case["micro"]
    plan = SkyRLRolePlan(
        colocate_all=True,
        policy_num_nodes=1,
        policy_num_gpus_per_node=1,
        num_inference_engines=1,
        inference_engine_tensor_parallel_size=1,
        inference_engine_pipeline_parallel_size=1,
        inference_engine_data_parallel_size=1,
        inference_engine_expert_parallel_size=1,
        train_batch_size=micro,
        policy_mini_batch_size=micro,
        micro_train_batch_size_per_gpu=micro,
        n_samples_per_prompt=1,
    )
    recipe = {
        "trainer": {
            "max_prompt_length": seq // 2,
            "gradient_checkpointing": bool(case.get("checkpointing", True)),
            "micro_forward_batch_size_per_gpu": micro,
            "algorithm": {"use_kl_loss": case["kind"] == "reference"},
        },
        "generator": {"sampling_params": {"max_generate_length": seq - seq // 2}},
    }
    facts = ModelFacts.from_hf_config(FAMILIES[case["family"]])
    report = memory_report(SkyRLTopology(1, 1, "H200", plan), recipe, "fsdp", facts)
    wanted = ("colocated", "training bar") if case["kind"] == "training" else ("reference", "forward")
    (row,) = [r for r in report.table.rows if (r.role, r.phase) == wanted]
    return row.estimate


def compare(path: str) -> int:
    with open(path) as f:
        data = json.load(f)
    print(f"{data['device']}, torch {data['torch']}, transformers {data['transformers']}; vLLM {data['vllm']}")
    print(f"{'family':13} {'kind':9} {'micro':>5} {'seq':>5} {'ckpt':>5} {'measured':>9} {'estimate':>9} {'error':>7}")
    errors: list[float] = []
    for case in data["cases"]:
        if "error" in case:
            print(f"{case['family']:13} {case['kind']:9} failed on the device: {case['error']}")
            continue
        ours = estimate(case)
        err = (ours - case["peak"]) / case["peak"]
        errors.append(err)
        ckpt = "-" if case["checkpointing"] is None else ("on" if case["checkpointing"] else "off")
        print(
            f"{case['family']:13} {case['kind']:9} {case['micro']:5} {case['seq']:5} {ckpt:>5} "
            f"{case['peak'] / GIB:8.2f}G {ours / GIB:8.2f}G {err:+7.1%}"
        )
    if errors:
        print(f"worst over-estimate {max(errors):+.1%}, worst under-estimate {min(errors):+.1%}, cases {len(errors)}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="run the grid on a GPU and write the measurements as JSON")
    m.add_argument("--out", required=True)
    m.add_argument("--budget-s", type=float, default=240.0, help="stop starting cases after this many seconds")
    m.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: exercise the script only")
    m.add_argument("--families", default=",".join(FAMILIES))
    m.add_argument("--loss", default="inplace", choices=tuple(LOSSES), help="how log-probabilities are taken")
    c = sub.add_parser("compare", help="print measured peaks beside the memory model's estimates")
    c.add_argument("path")
    args = parser.parse_args()
    if args.command == "measure":
        global _LOSS
        _LOSS = args.loss
        return measure(args.out, args.budget_s, args.device, args.families.split(","))
    return compare(args.path)


if __name__ == "__main__":
    sys.exit(main())
