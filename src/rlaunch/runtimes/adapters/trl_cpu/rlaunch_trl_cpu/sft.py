"""A short supervised warm start: teach a saved HF model the answer format of prompt rows.

    python -m rlaunch_trl_cpu.sft --model DIR --data FILE --out DIR --steps N --seed S
        [--batch-size B] [--lr LR]

RL on a randomly initialised model has nothing to sharpen: every completion is wrong, so every
group's reward is flat. A few supervised steps on the rows' ground truth (the completion is the
answer, then the end-of-turn token) give a policy with the right format and partial accuracy,
which the RL step can then lift. Plain PyTorch (AdamW, loss on the completion's tokens only,
deterministic for a seed); writes the model, its generation config and tokenizer to `--out` and
prints one JSON line: the steps, the first and last loss, and the sha256 of every file written.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import Any


def _examples(tokenizer: Any, rows: list[dict[str, Any]]) -> list[tuple[list[int], int]]:
    """Each row as (prompt + answer + eos token ids, where the answer starts)."""
    out = []
    for row in rows:
        prompt = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(str(row["ground_truth"]), add_special_tokens=False)["input_ids"]
        out.append((prompt_ids + answer_ids + [tokenizer.eos_token_id], len(prompt_ids)))
    return out


def _batch(examples: list[tuple[list[int], int]], pad_id: int) -> tuple[Any, Any, Any]:
    """Right-padded ids, attention mask and labels (-100 outside the answer and the eos)."""
    import torch

    width = max(len(ids) for ids, _ in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    for index, (tokens, start) in enumerate(examples):
        ids[index, : len(tokens)] = torch.tensor(tokens)
        mask[index, : len(tokens)] = 1
        labels[index, start : len(tokens)] = torch.tensor(tokens[start:])
    return ids, mask, labels


def train(
    model_dir: str, data_file: str, out: str, *, steps: int, seed: int, batch_size: int = 16, lr: float = 3e-3
) -> dict[str, Any]:
    from . import data
    from .libraries import quiet_libraries
    from .tiny import _files_sha256, _portable_tokenizer_config

    started = time.time()
    quiet_libraries()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    rng = random.Random(seed)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    examples = _examples(tokenizer, data.load_rows([data_file], "arithmetic"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    order: list[int] = []
    for _ in range(steps):
        if len(order) < batch_size:  # one shuffled pass after another
            order += rng.sample(range(len(examples)), len(examples))
        chosen, order = order[:batch_size], order[batch_size:]
        ids, mask, labels = _batch([examples[i] for i in chosen], tokenizer.pad_token_id)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    model.eval()
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    _portable_tokenizer_config(out)
    return {
        "kind": "sft",
        "out": os.path.abspath(out),
        "steps": steps,
        "seed": seed,
        "batch_size": batch_size,
        "lr": lr,
        "examples": len(examples),
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "seconds": round(time.time() - started, 2),
        "files": _files_sha256(out),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlaunch_trl_cpu.sft", description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args(argv)
    from .data import DataError

    try:
        info = train(
            args.model, args.data, args.out, steps=args.steps, seed=args.seed, batch_size=args.batch_size, lr=args.lr
        )
    except DataError as exc:
        sys.stderr.write(f"rlaunch_trl_cpu.sft: {exc}\n")
        return 2
    sys.stdout.write(json.dumps(info, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
