"""Supervised fine-tuning on conversations, loss on the last assistant message only.

    python -m rlaunch_trl_cpu.sft --model DIR --data FILE.jsonl --out DIR --steps N --seed S
        [--batch-size B] [--micro-batch M] [--max-length L] [--lr LR]

The CPU twin of the fsdp runtime's SFT (SkyRL's own `SFTTrainer`, `rlaunch_skyrl.sft`): the same
data, one conversation a line (`{"messages": [..., {"role": "assistant", "content": ...}]}`, as
`rlaunch.training` writes it), the same target (the last assistant message and the end-of-turn
token). RL on a randomly initialised model has nothing to sharpen; a few supervised steps give a
policy with the right format and partial accuracy, which the RL step can then lift.

Plain PyTorch (AdamW, deterministic for a seed): each optimizer step takes `B` conversations (one
shuffled pass after another), in micro batches of `M` whose losses are weighted by their share of
the batch's response tokens (so the step's loss is the batch's token mean whatever `M`); a
conversation longer than `L` tokens is cut to `L`, and dropped when nothing of its response is
left. Writes the model, its generation config and tokenizer to `--out` and prints one JSON line:
the steps, every step's loss, the first and last loss, and the sha256 of every file written.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from typing import Any


class ConversationError(ValueError):
    pass


def read_conversations(path: str) -> list[list[dict[str, str]]]:
    """The conversations of a JSONL file; refuses one whose last message is not the assistant's."""
    if not os.path.exists(path):
        raise ConversationError(f"--data {path} does not exist")
    out = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            messages = json.loads(line).get("messages")
            if not isinstance(messages, list) or len(messages) < 2 or messages[-1].get("role") != "assistant":
                raise ConversationError(
                    f"{path}:{number}: 'messages' must be a prompt then the assistant's response (the trained part)"
                )
            out.append(messages)
    return out


def _examples(
    tokenizer: Any, conversations: list[list[dict[str, str]]], max_length: int
) -> list[tuple[list[int], int]]:
    """Each conversation as (prompt + response + eos token ids, where the response starts), cut to
    `max_length`; a conversation whose response would be cut away entirely is dropped."""
    out = []
    for messages in conversations:
        prompt = tokenizer.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        answer_ids = tokenizer(messages[-1]["content"], add_special_tokens=False)["input_ids"]
        if len(prompt_ids) < max_length:
            out.append(((prompt_ids + answer_ids + [tokenizer.eos_token_id])[:max_length], len(prompt_ids)))
    return out


def _batch(examples: list[tuple[list[int], int]], pad_id: int) -> tuple[Any, Any, Any]:
    """Right-padded ids, attention mask and labels (-100 outside the response and the eos)."""
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


def _targets(examples: list[tuple[list[int], int]]) -> int:
    """Tokens a batch's loss is averaged over: each response token predicted from the one before."""
    return sum(len(tokens) - max(start, 1) for tokens, start in examples)


def train(
    model_dir: str,
    data_file: str,
    out: str,
    *,
    steps: int,
    seed: int,
    batch_size: int = 16,
    micro_batch: int | None = None,
    max_length: int = 4096,
    lr: float = 3e-3,
) -> dict[str, Any]:
    from .libraries import quiet_libraries
    from .tiny import _files_sha256, _portable_tokenizer_config

    started = time.time()
    quiet_libraries()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    rng = random.Random(seed)
    micro = micro_batch or batch_size
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    conversations = read_conversations(data_file)
    examples = _examples(tokenizer, conversations, max_length)
    if not examples:
        raise ConversationError(
            f"--max-length {max_length}: every conversation's prompt fills it, so no response token is left to "
            "train on; raise max_length"
        )
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    order: list[int] = []
    for _ in range(steps):
        if len(order) < batch_size:  # one shuffled pass after another
            order += rng.sample(range(len(examples)), len(examples))
        chosen, order = order[:batch_size], order[batch_size:]
        batch = [examples[i] for i in chosen]
        total = _targets(batch)
        optimizer.zero_grad()
        step_loss = 0.0
        for first in range(0, len(batch), micro):
            part = batch[first : first + micro]
            ids, mask, labels = _batch(part, tokenizer.pad_token_id)
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss * (_targets(part) / total)
            loss.backward()
            step_loss += float(loss)
        optimizer.step()
        losses.append(step_loss)
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
        "micro_batch": micro,
        "max_length": max_length,
        "lr": lr,
        "examples": len(examples),
        "dropped": len(conversations) - len(examples),
        "losses": losses,
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
    parser.add_argument("--micro-batch", type=int, default=None)
    parser.add_argument("--max-length", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args(argv)
    try:
        info = train(
            args.model, args.data, args.out, steps=args.steps, seed=args.seed, batch_size=args.batch_size,
            micro_batch=args.micro_batch, max_length=args.max_length, lr=args.lr,
        )  # fmt: skip
    except ConversationError as exc:
        sys.stderr.write(f"rlaunch_trl_cpu.sft: {exc}\n")
        return 2
    sys.stdout.write(json.dumps(info, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
