"""The GPU SFT step on one GPU, end to end: SkyRL 0.4.0's SFTTrainer in the fsdp runtime, loss going down.

    PYTHONPATH=src .venv/bin/python benchmarks/gpu_sft_check.py [--gpus 1] [--steps 12] [--work DIR]

Self-contained: nothing comes from a model hub. In the fsdp runtime's own environment (built from its
lock on first use, or found in `$RLAUNCH_RUNTIME_CACHE`: a machine without network needs it built
there beforehand), it builds a tokenizer (byte-level BPE trained on arithmetic text, a ChatML
template) and a randomly initialised Qwen3 (`--hidden-size` 256, `--layers` 4: about 1M parameters
besides the embeddings) with `rlaunch_trl_cpu.tiny`, which needs only transformers and tokenizers,
and 256 arithmetic prompt rows. It prints the SFT step's memory rows on the device as the dry run
does (`sft_memory`'s table), then runs the library step's own function (`rlaunch.training.warm_start.train`,
what the step job runs: the rows turned into conversations, `skyrl_sft_overrides` rendered, then
`python -m rlaunch_skyrl.sft` in the runtime, SFT over `--gpus` GPUs of this node) and prints every
step's loss, the exported files with their sha256 and `PASS` when the last loss is below the first,
or `FAIL` (exit 1). About 2 to 4 minutes on one H100 once the environment exists (Ray's start-up
and the FSDP workers dominate).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from rlaunch.rules.devices import device  # noqa: E402
from rlaunch.rules.memory import gib, sft_table  # noqa: E402
from rlaunch.rules.model_shape import Architecture, from_hf_config  # noqa: E402
from rlaunch.runtimes.environment import ensure_environment  # noqa: E402
from rlaunch.runtimes.registry import get_profile  # noqa: E402
from rlaunch.training.warm_start import SftSettings, train  # noqa: E402

TINY = REPO / "src" / "rlaunch" / "runtimes" / "adapters" / "trl_cpu"  # rlaunch_trl_cpu.tiny: pure transformers


def tiny(env_python: str, *args: str) -> dict[str, object]:
    """Run `rlaunch_trl_cpu.tiny` with the fsdp runtime's interpreter; its JSON line."""
    done = subprocess.run(
        [env_python, "-m", "rlaunch_trl_cpu.tiny", *args],
        env={**os.environ, "PYTHONPATH": str(TINY)},
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"rlaunch_trl_cpu.tiny {args[0]} failed:\n{done.stderr[-3000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=1)
    parser.add_argument("--gpu", default="H100", help="the device the memory rows are sized against")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--work", type=Path, help="keep everything here (default: a temporary directory)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-sft-check-"))
    started = time.monotonic()
    env = ensure_environment(get_profile("fsdp"), progress=lambda m: print(f"[env] {m}", flush=True))
    print(f"fsdp environment ready ({time.monotonic() - started:.0f}s): {env.python}", flush=True)

    tiny(env.python, "tokenizer", "--out", str(work / "tokenizer"), "--seed", "0")
    model = work / "model"
    tiny(env.python, "model", "--tokenizer", str(work / "tokenizer"), "--out", str(model), "--seed", "0",
         "--hidden-size", str(args.hidden_size), "--layers", str(args.layers), "--heads", "4", "--kv-heads", "2",
         "--context-length", "512")  # fmt: skip
    tiny(env.python, "data", "--out", str(work / "data" / "train.jsonl"), "--rows", "256", "--seed", "0")

    settings = SftSettings(steps=args.steps, batch_size=8 * args.gpus, micro_batch=4, lr=1e-3, max_length=128)
    arch = from_hf_config(json.loads((model / "config.json").read_text()))
    dev = device(args.gpu)
    if isinstance(arch, Architecture) and dev is not None:
        table = sft_table(arch, dev, gpus=args.gpus, micro_batch=settings.micro_batch, max_length=settings.max_length)
        for row in table.rows:
            print(f"memory: {row.role} {row.phase} ~{gib(row.estimate)} of {gib(row.capacity)} GiB [{row.status}]")

    out = work / "sft"
    config = {
        "output_path": str(out),
        "model_path": str(model),
        "data_uri": str(work / "data" / "train.jsonl"),
        "response": "reward_spec.ground_truth",
        "settings": dataclasses.asdict(settings),
        "runtime": "fsdp",
        "tool": "skyrl",
        "gpus": args.gpus,
    }
    began = time.monotonic()
    exported = train(config)
    trained = json.loads((out / "sft.json").read_text())
    print(f"SFT: {trained['steps']} steps in {time.monotonic() - began:.0f}s")
    for step, loss in enumerate(trained["losses"], 1):
        print(f"  step {step:3d}  loss {loss:.4f}")
    print(f"exported {exported.path}:")
    for name, digest in exported.files.items():
        print(f"  {digest}  {name}")
    went_down = bool(trained["losses"]) and trained["last_loss"] < trained["first_loss"]
    print("PASS: the loss went down" if went_down else "FAIL: the loss did not go down")
    return 0 if went_down else 1


if __name__ == "__main__":
    raise SystemExit(main())
