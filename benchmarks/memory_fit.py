"""On a GPU: training steps' `torch.cuda.max_memory_allocated` and vLLM's printed KV cache beside the estimates.

    # on a machine with a CUDA torch and transformers (the lent GPU; vLLM too for its half):
    # measure both grids, write JSON
    PYTHONPATH=src python benchmarks/memory_fit.py measure --out memory_fit_gpu.json
    # anywhere (no torch): each measured case beside `rlaunch.rules.memory`'s estimate of it
    PYTHONPATH=src python3 benchmarks/memory_fit.py compare benchmarks/memory_fit_h200.json

`measure` builds transformers' real model classes from configs written here (no download) and
holds them as SkyRL's FSDP policy does on one GPU: fp32 master weights sharded by FSDP2
(`fully_shard` per decoder layer and at the root, world size 1) with bf16 parameters for compute
and fp32 gradient reduction, AdamW, gradient checkpointing on and off. The loss takes fp32
log-probabilities of the sampled tokens from the logits (`--loss`: SkyRL's in-place path or HF's
`log_softmax`). Each case runs two steps and records the second (Adam's moments exist by then): the
forward/backward peak and the optimizer-step peak apart, and the model states resident before the
step. A reference case is a no-grad bf16 forward with the same log-probabilities.

Then, where vLLM is importable (and the device is CUDA), it starts vLLM once per case of
`VLLM_GRID` (small shapes of `FAMILIES`), each in a subprocess of its own with a timeout: the
config.json is written to a temporary directory (no download: `load_format="dummy"` gives random
weights, `skip_tokenizer_init=True` needs no tokenizer), `LLM(...)` is built with the case's
`gpu_memory_utilization`, `max_model_len`, `enforce_eager`, `max_num_seqs` and
`max_num_batched_tokens` in bf16 with the engine in process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, as
SkyRL runs it), and the start-up log is parsed (`parse_vllm_log`): "GPU KV cache size: N tokens"
(V0 and vLLM 0.7: "# GPU blocks: N" of 16 tokens), "Maximum concurrency for L tokens per request:
X.XXx", and where printed the available KV memory, the weights and the CUDA graphs. A failing case
records its error and the log's last lines; each grid has its own time budget.

`compare` reads such a file and prints each training case's measured peak beside the estimate of
the same plan on one GPU (the policy's training step, the reference forward), and each vLLM case's
KV tokens and concurrency beside `rlaunch.rules.memory.engine_kv` of the same engine on the
measured device (its capacity from the file's header), with the relative errors. The measured JSON
is kept in the repository (`memory_fit_h200.json`) so the comparison reruns on every change of the
model without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
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
# vLLM's class for each `model_type` above (the config.json vLLM reads names it in `architectures`).
ARCHITECTURES = {
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "llama": "LlamaForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
}
TRAIN_GRID = [(micro, seq, ckpt) for micro in (1, 4) for seq in (1024, 4096) for ckpt in (True, False)]
REFERENCE_GRID = [(micro, seq) for micro in (1, 4) for seq in (1024, 4096)]
# One vLLM engine (TP 1) a case. Every setting the estimate reads is set explicitly, so vLLM's own
# defaults (which vary by version, GPU and entry point) do not decide the comparison. The last case
# is SkyRL's engine defaults (0.8 of the GPU, 1024 sequences, CUDA graphs).
VLLM_GRID: list[dict[str, Any]] = [
    {"family": "qwen2", "gpu_memory_utilization": 0.5, "max_model_len": 4096, "enforce_eager": True,
     "max_num_seqs": 256, "max_num_batched_tokens": 8192},
    {"family": "qwen3", "gpu_memory_utilization": 0.5, "max_model_len": 8192, "enforce_eager": True,
     "max_num_seqs": 1024, "max_num_batched_tokens": 8192},
    {"family": "qwen2", "gpu_memory_utilization": 0.8, "max_model_len": 4096, "enforce_eager": False,
     "max_num_seqs": 1024, "max_num_batched_tokens": 8192},
]  # fmt: skip
V0_BLOCK = 16  # tokens a "# GPU blocks" block holds (vLLM's default block size; the grid sets none)


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


# --- vLLM's start-up log (pure: parsing only) -------------------------------------------------

# What vLLM prints at start-up, across the versions whose published logs tests/rules reproduces:
# V1 (0.8 on): "GPU KV cache size: 93,872 tokens" then "Maximum concurrency for 16,384 tokens per
# request: 5.73x" (newer builds print both on one line); V0 and vLLM 0.7: "# GPU blocks: 1381" and
# the same concurrency line. The memory lines: "Available KV cache memory: 5.01 GiB" (V1),
# "kv_cache_size=3.81GiB" (V0 0.6); "Model loading took 14.2488 GiB" (V1), "Loading model weights
# took 67.7229 GB" (V0, vLLM 0.7; GiB); "Graph capturing finished in 3 secs, took 0.50 GiB".
_NUMBER = r"(\d[\d,]*(?:\.\d+)?)"
_PATTERNS: dict[str, tuple[str, ...]] = {
    "kv_tokens": (rf"GPU KV cache size: {_NUMBER} tokens",),
    "gpu_blocks": (rf"# GPU blocks: {_NUMBER}", rf"num_gpu_blocks is: {_NUMBER}"),
    "concurrency": (rf"Maximum concurrency for {_NUMBER} tokens per request: {_NUMBER}x",),
    "available_kv_gib": (
        rf"Available KV cache memory: {_NUMBER} ?GiB",
        rf"kv_cache_size={_NUMBER} ?GiB",
        rf"reserved for KV Cache is {_NUMBER} ?GiB",
    ),
    "weights_gib": (
        rf"Model loading took {_NUMBER} ?GiB",
        rf"Loading model weights took {_NUMBER} ?GB",
        rf"model weights take {_NUMBER} ?GiB",
    ),
    "graphs_gib": (rf"Graph capturing finished in {_NUMBER} secs?, took {_NUMBER} ?GiB",),
}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def parse_vllm_log(text: str) -> dict[str, Any]:
    """vLLM's printed KV numbers in `text` (its start-up output): every key of `_PATTERNS`, None where
    vLLM printed no such line; `concurrency_len` is the length the concurrency line names. The first
    match counts (a line is printed once per engine)."""
    text = _ANSI.sub("", text)
    found: dict[str, Any] = {key: None for key in _PATTERNS} | {"concurrency_len": None}
    for key, patterns in _PATTERNS.items():
        for pattern in patterns:
            m = re.search(pattern, text)
            if m is None:
                continue
            if key == "concurrency":
                found["concurrency_len"], found[key] = int(_number(m[1])), _number(m[2])
            elif key == "graphs_gib":
                found[key] = _number(m[2])
            else:
                found[key] = int(_number(m[1])) if key in ("kv_tokens", "gpu_blocks") else _number(m[1])
            break
    return found


def measured_kv_tokens(parsed: dict[str, Any]) -> int | None:
    """The KV cache in tokens vLLM printed: "GPU KV cache size", else "# GPU blocks" of 16 tokens."""
    if parsed.get("kv_tokens") is not None:
        return int(parsed["kv_tokens"])
    if parsed.get("gpu_blocks") is not None:
        return int(parsed["gpu_blocks"]) * V0_BLOCK
    return None


def kv_log_error(parsed: dict[str, Any]) -> str | None:
    """Why `parsed` holds no KV cache size (None when it holds one)."""
    if measured_kv_tokens(parsed) is not None:
        return None
    return "vLLM printed no 'GPU KV cache size: N tokens' (nor '# GPU blocks: N') line"


def _kv_lines(text: str, limit: int = 12) -> list[str]:
    """The start-up lines the parser reads, kept verbatim in the JSON for whoever checks a number."""
    keys = ("KV cache", "GPU blocks", "Maximum concurrency", "Model loading took", "weights took", "Graph capturing")
    lines = [line.strip() for line in _ANSI.sub("", text).splitlines() if any(k in line for k in keys)]
    return [line[:300] for line in lines[:limit]]


# --- measure's vLLM half (needs vLLM, run in a subprocess) ------------------------------------

_VLLM_CHILD = """
import json, sys
import vllm
print("rlaunch-vllm-version " + vllm.__version__, flush=True)
from vllm import LLM
LLM(**json.loads(sys.argv[1]))
print("rlaunch-vllm-ready", flush=True)
sys.stderr.flush()
import os
os._exit(0)  # the numbers are printed: skip the engine's teardown
"""


def write_model_dir(family: str, path: str) -> str:
    """A model directory vLLM can start from without a download: the family's config.json, naming
    its class. The weights are vLLM's dummy (random) ones; no tokenizer is needed (skipped)."""
    config = {**FAMILIES[family], "architectures": [ARCHITECTURES[FAMILIES[family]["model_type"]]]}
    config["torch_dtype"] = "bfloat16"
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    return path


def vllm_kwargs(case: dict[str, Any], model_dir: str) -> dict[str, Any]:
    """`LLM(...)`'s arguments for one case of `VLLM_GRID`."""
    return {
        "model": model_dir,
        "load_format": "dummy",
        "skip_tokenizer_init": True,
        "dtype": "bfloat16",
        "seed": 0,
        **{k: case[k] for k in VLLM_SETTINGS},
    }


VLLM_SETTINGS = ("gpu_memory_utilization", "max_model_len", "enforce_eager", "max_num_seqs", "max_num_batched_tokens")


def _vllm_case(case: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    """Start vLLM on `case` in a subprocess and read its start-up output. The child runs in a session
    of its own: when it exits (or at the timeout) the whole session is killed, so nothing it started
    (torch.compile's workers) outlives it or holds its output open."""
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")}
    env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the engine in the child, as SkyRL runs it
    timed_out = False
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="memory_fit_vllm_") as model_dir:
        write_model_dir(case["family"], model_dir)
        kwargs = json.dumps(vllm_kwargs(case, model_dir))
        proc = subprocess.Popen(
            [sys.executable, "-c", _VLLM_CHILD, kwargs],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            env=env,
            start_new_session=True,
        )
        assert proc.stdout is not None
        stdout = proc.stdout
        reader = threading.Thread(target=lambda: lines.extend(iter(stdout.readline, "")), daemon=True)
        reader.start()
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the child at its timeout, else what it left behind
        except ProcessLookupError:
            pass
        proc.wait()
        reader.join(timeout=30)
        stdout.close()
    output = "".join(lines)
    parsed = parse_vllm_log(output)
    version = re.search(r"rlaunch-vllm-version (\S+)", output)
    result: dict[str, Any] = {
        "kind": "vllm",
        "vllm": version[1] if version else None,
        **parsed,
        "returncode": proc.returncode,
        "log_lines": _kv_lines(output),
    }
    if timed_out or proc.returncode != 0 or "rlaunch-vllm-ready" not in output:
        why = f"timed out after {timeout_s:.0f} s" if timed_out else f"exit code {proc.returncode}"
        tail = " | ".join(line.strip() for line in output.strip().splitlines()[-8:])[-1500:]
        problem = kv_log_error(parsed)
        # No KV numbers: the case failed. KV numbers printed before a later failure (CUDA graphs,
        # warm-up): they are kept, with the failure beside them.
        result["error" if problem else "warning"] = (
            f"{problem or 'vLLM did not finish starting'} ({why}); last lines: {tail}"
        )
    elif (problem := kv_log_error(parsed)) is not None:
        result["error"] = f"{problem} (vLLM started; its log wording may have changed)"
    return result


def measure(args: argparse.Namespace) -> int:
    import importlib.util
    from importlib import metadata

    import torch
    import torch.distributed as dist
    import transformers

    device, families = args.device, args.families.split(",")
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: nothing measured")
        return 0
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=0, world_size=1)
    if device == "cuda":
        torch.cuda.set_device(0)
    vllm = "not installed on this machine"
    if importlib.util.find_spec("vllm"):
        try:
            vllm = metadata.version("vllm")
        except metadata.PackageNotFoundError:
            vllm = "installed (version unknown)"
    header = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu (dry run of the script)",
        # what vLLM multiplies by gpu_memory_utilization (torch.cuda.mem_get_info's total)
        "device_bytes": torch.cuda.mem_get_info()[1] if device == "cuda" else 0,
        "device_sm": (lambda c: c[0] * 10 + c[1])(torch.cuda.get_device_capability()) if device == "cuda" else 0,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "vllm": vllm,
        "loss": LOSSES[_LOSS],
        "setup": "FSDP2 fully_shard per layer and root, world 1, bf16 params, fp32 reduce; AdamW; step 2 recorded",
    }
    print(json.dumps(header))
    cases: list[dict[str, Any]] = []
    plan = [("training", n, m, s, c) for n in families for m, s, c in TRAIN_GRID]
    plan += [("reference", n, m, s, None) for n in families for m, s in REFERENCE_GRID]
    start = time.monotonic()
    for done, (kind, name, micro, seq, ckpt) in enumerate([] if args.skip_training else plan):
        if time.monotonic() - start > args.budget_s:
            print(f"time budget of {args.budget_s:.0f} s spent: {len(plan) - done} cases left unmeasured")
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
        _write(args.out, header, cases)
        _reset(device)
    dist.destroy_process_group()
    grid = [c for c in VLLM_GRID if c["family"] in families]
    if args.skip_vllm or not grid:
        pass
    elif device != "cuda" or vllm.startswith("not installed"):
        print(f"vLLM cases not run: {'vLLM is ' + vllm if device == 'cuda' else 'no CUDA device'}")
    else:
        _reset(device)  # the training grid's cached blocks go back before vLLM measures the device
        start = time.monotonic()
        for done, setting in enumerate(grid):
            if time.monotonic() - start > args.vllm_budget_s:
                print(f"vLLM time budget of {args.vllm_budget_s:.0f} s spent: {len(grid) - done} cases left unmeasured")
                break
            t0 = time.monotonic()
            case = {**setting, "free_bytes_before": torch.cuda.mem_get_info()[0]}
            try:
                case |= _vllm_case(setting, args.vllm_timeout_s)
            except Exception as exc:  # one failing case must not lose the grid
                case |= {"kind": "vllm", "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
            case["seconds"] = round(time.monotonic() - t0, 2)
            cases.append(case)
            print(json.dumps(case), flush=True)
            _write(args.out, header, cases)
    _write(args.out, header, cases)
    print(f"wrote {len(cases)} cases to {args.out}")
    return 0


def _write(out: str, header: dict[str, Any], cases: list[dict[str, Any]]) -> None:
    """The file so far: rewritten after every case, so a run cut short keeps what it measured."""
    with open(out, "w") as f:
        json.dump({**header, "cases": cases}, f, indent=1)


# --- compare (pure: rlaunch's memory model only) ----------------------------------------------


def _one_gpu_plan(micro: int) -> Any:
    """One GPU, colocated, one engine of TP 1: the plan every measured case is estimated as."""
    from rlaunch.skyrl import SkyRLRolePlan

    return SkyRLRolePlan(
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


def estimate(case: dict[str, Any]) -> int:
    """The memory model's bytes for a measured case on one GPU (H200): the policy's training step
    with the engine asleep, or the reference's forward."""
    from rlaunch.skyrl import ModelFacts, SkyRLTopology
    from rlaunch.skyrl.views.memory_fit import memory_report

    seq, micro = case["seq"], case["micro"]
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
    report = memory_report(SkyRLTopology(1, 1, "H200", _one_gpu_plan(micro)), recipe, "fsdp", facts)
    wanted = ("colocated", "training bar") if case["kind"] == "training" else ("reference", "forward")
    (row,) = [r for r in report.table.rows if (r.role, r.phase) == wanted]
    return row.estimate


def measured_device(data: dict[str, Any]) -> Any:
    """The device a file was measured on, as the memory model sizes one: its name and the total
    memory the header records (vLLM's budget is a fraction of it); for a file without it, the
    device table's entry for the name (None where the table has none)."""
    from rlaunch.rules.devices import Device, device

    if data.get("device_bytes"):
        source = "measured: torch.cuda.mem_get_info() total on the device"
        return Device(data["device"], int(data["device_bytes"]), source, sm=int(data.get("device_sm") or 0))
    return device(str(data["device"]).removeprefix("NVIDIA").strip())


def estimate_kv(case: dict[str, Any], dev: Any) -> Any:
    """`rlaunch.rules.memory.engine_kv` of the engine a vLLM case started: SkyRL's recipe composed
    for one GPU with the case's engine settings, the family's architecture, on `dev`."""
    from rlaunch.launch_config.geometry import Geometry
    from rlaunch.rules import memory
    from rlaunch.runtimes.registry import get_profile
    from rlaunch.skyrl import ModelFacts
    from rlaunch.skyrl.values.config_yaml import render_recipe

    length = int(case["max_model_len"])
    engine = {k: case[k] for k in VLLM_SETTINGS if k != "max_model_len"}
    recipe = {
        "trainer": {"max_prompt_length": length // 2},
        "generator": {
            "sampling_params": {"max_generate_length": length - length // 2},
            "inference_engine": {**engine, "engine_init_kwargs": {"max_model_len": length}},
        },
    }
    profile = get_profile("fsdp")
    composed, problems = profile.compose(render_recipe(recipe, _one_gpu_plan(1), profile, 0))
    if problems:
        raise ValueError(f"the engine's recipe does not compose: {problems}")
    arch = ModelFacts.from_hf_config(FAMILIES[case["family"]]).architecture
    return memory.engine_kv(arch, Geometry.from_recipe(composed), composed, dev)


def compare(path: str) -> int:
    with open(path) as f:
        data = json.load(f)
    print(f"{data['device']}, torch {data['torch']}, transformers {data['transformers']}; vLLM {data['vllm']}")
    training = [c for c in data["cases"] if c.get("kind") != "vllm"]
    engines = [c for c in data["cases"] if c.get("kind") == "vllm"]
    if training:
        _compare_training(training)
    if engines:
        _compare_vllm(engines, data)
    return 0


def _compare_training(cases: list[dict[str, Any]]) -> None:
    print(f"{'family':13} {'kind':9} {'micro':>5} {'seq':>5} {'ckpt':>5} {'measured':>9} {'estimate':>9} {'error':>7}")
    errors: list[float] = []
    for case in cases:
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


def _compare_vllm(cases: list[dict[str, Any]], data: dict[str, Any]) -> None:
    dev = measured_device(data)
    if dev is None:
        print(f"vLLM cases: {data['device']!r} has no recorded capacity and is not in the device table: not estimated")
        return
    print(
        f"vLLM start-up KV cache (one engine, TP 1) beside rlaunch.rules.memory.engine_kv on {dev.name}, "
        f"{dev.bytes / GIB:.2f} GiB"
    )
    print(
        f"{'family':13} {'util':>4} {'max_len':>7} {'eager':>5} {'seqs':>5} {'KV tokens':>10} {'estimate':>10} "
        f"{'error':>7} {'concurrency':>11} {'estimate':>8} {'KV GiB':>7} {'estimate':>8}"
    )
    errors: list[float] = []
    for case in cases:
        tokens = measured_kv_tokens(case)
        if "error" in case or tokens is None:
            print(f"{case['family']:13} vllm failed on the device: {case.get('error', kv_log_error(case))}")
            continue
        kv = estimate_kv(case, dev)
        err = (kv.tokens - tokens) / tokens if tokens else float("inf")
        errors.append(err)
        conc = "-" if case.get("concurrency") is None else f"{case['concurrency']:.2f}x"
        avail = "-" if case.get("available_kv_gib") is None else f"{case['available_kv_gib']:.2f}"
        print(
            f"{case['family']:13} {case['gpu_memory_utilization']:4.2f} {case['max_model_len']:7} "
            f"{'on' if case['enforce_eager'] else 'off':>5} {case['max_num_seqs']:5} {tokens:10,} {kv.tokens:10,} "
            f"{err:+7.1%} {conc:>11} {kv.sequences:7.2f}x {avail:>7} {kv.available / GIB:8.2f}"
        )
        if case.get("warning"):
            print(f"  note: {case['warning'][:200]}")
    if errors:
        print(
            f"KV tokens: worst over-estimate {max(errors):+.1%}, worst under-estimate {min(errors):+.1%}, cases {len(errors)}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="run the grids on a GPU and write the measurements as JSON")
    m.add_argument("--out", required=True)
    m.add_argument("--budget-s", type=float, default=240.0, help="stop starting training cases after this many seconds")
    m.add_argument("--device", default="cuda", choices=("cuda", "cpu"), help="cpu: exercise the script only")
    m.add_argument("--families", default=",".join(FAMILIES))
    m.add_argument("--loss", default="inplace", choices=tuple(LOSSES), help="how log-probabilities are taken")
    m.add_argument("--skip-training", action="store_true", help="only the vLLM cases")
    m.add_argument("--skip-vllm", action="store_true", help="only the training and reference cases")
    m.add_argument(
        "--vllm-budget-s", type=float, default=300.0, help="stop starting vLLM cases after this many seconds"
    )
    m.add_argument("--vllm-timeout-s", type=float, default=240.0, help="kill one vLLM start-up after this long")
    c = sub.add_parser("compare", help="print measured peaks and KV caches beside the memory model's estimates")
    c.add_argument("path")
    args = parser.parse_args(argv)
    if args.command == "measure":
        global _LOSS
        _LOSS = args.loss
        return measure(args)
    return compare(args.path)


if __name__ == "__main__":
    sys.exit(main())
