"""Score a saved HF model on prompt rows with a registered reward.

    python -m rlaunch_trl_cpu.evaluate --model DIR --data FILE --env-class arithmetic \\
        --max-new-tokens N --seed S [--limit K] [--temperature T] [--samples M] [--batch-size B]

Loads the model and its tokenizer with transformers (`AutoModelForCausalLM` + `AutoTokenizer`),
generates M completions per prompt (greedy when T = 0, the default; sampled with the seed
otherwise), scores each with the reward registered for the row's env class (`--env-class` for
rows without one) and prints one JSON line::

    {"reward_mean", "reward_std", "accuracy" (share of rewards >= 1), "accuracy_interval" (95%,
     clustered by prompt), "stderr", "n" (completions scored), "n_prompts", "samples" (per prompt),
     "per_prompt" (each prompt's accuracy), "prompts", "model", "data", "scorer" (the env class),
     "sampling": {"temperature", "samples", "max_new_tokens", "seed"}, "weights_sha256", "seconds",
     "example": {"prompt", "completion", "reward"}}
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time


def score(
    model,
    tokenizer,
    rows: list[dict],
    *,
    max_new_tokens: int,
    batch_size: int = 16,
    temperature: float = 0.0,
    samples: int = 1,
) -> tuple[list[float], dict | None]:
    """Generate for every row (greedy when temperature <= 0) and score with the row's reward.

    Used by the CLI below and by the trainer's in-training evaluation on `data.val_data`."""
    import torch

    from . import rewards

    was_training = model.training
    model.eval()
    do_sample = temperature > 0
    per_row = samples if do_sample else 1
    scores: list[float] = []
    example = None
    try:
        for start in range(0, len(rows), max(1, batch_size)):
            batch = rows[start : start + max(1, batch_size)]
            texts = [
                tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in batch
            ]
            encoded = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            kwargs = {"max_new_tokens": max_new_tokens, "do_sample": do_sample, "pad_token_id": tokenizer.pad_token_id}
            if do_sample:
                kwargs.update(temperature=temperature, top_p=1.0, top_k=0, num_return_sequences=per_row)
            with torch.no_grad():
                output = model.generate(**encoded, **kwargs)
            completions = tokenizer.batch_decode(output[:, encoded["input_ids"].shape[1] :], skip_special_tokens=True)
            for index, completion in enumerate(completions):
                row = batch[index // per_row]
                value = float(rewards.get(row["env_class"])(completion, row["ground_truth"]))
                scores.append(value)
                if example is None:
                    example = {"prompt": row["prompt"][-1]["content"], "completion": completion, "reward": value}
    finally:
        if was_training:
            model.train()
    return scores, example


def summarise(scores: list[float]) -> dict:
    n = len(scores)
    mean = sum(scores) / n if n else 0.0
    return {
        "reward_mean": mean,
        "reward_std": math.sqrt(sum((s - mean) ** 2 for s in scores) / n) if n else 0.0,
        "accuracy": sum(1 for s in scores if s >= 1.0) / n if n else 0.0,
        "n": n,
    }


Z95 = 1.959963984540054  # the standard normal's 97.5th percentile


def clustered_accuracy(scores: list[list[float]], z: float = Z95) -> dict:
    """Accuracy over `scores` (one list of 0/1 successes per prompt) with its 95% interval clustered
    by prompt: a copy of `rlaunch.intervals.clustered_accuracy` (its docstring has the formula and
    its source; the adapter cannot import rlaunch), as `Accuracy.to_json()` writes it."""
    n = sum(len(prompt) for prompt in scores)
    prompts = [prompt for prompt in scores if prompt]
    if n == 0:
        return {"accuracy": 0.0, "accuracy_interval": [0.0, 1.0], "stderr": 0.0, "n": 0, "n_prompts": 0,
                "samples": None, "per_prompt": []}  # fmt: skip
    p = sum(sum(prompt) for prompt in prompts) / n
    stderr = math.sqrt(sum((sum(prompt) - len(prompt) * p) ** 2 for prompt in prompts)) / n
    n_eff = min(float(n), max(float(len(prompts)), p * (1 - p) / stderr**2 if stderr > 0 else 0.0))
    centre = (p + z * z / (2 * n_eff)) / (1 + z * z / n_eff)
    half = z * math.sqrt(p * (1 - p) / n_eff + z * z / (4 * n_eff * n_eff)) / (1 + z * z / n_eff)
    return {
        "accuracy": p,
        "accuracy_interval": [max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))],  # holds p exactly
        "stderr": stderr,
        "n": n,
        "n_prompts": len(prompts),
        "samples": None if n % len(prompts) else n // len(prompts),
        "per_prompt": [sum(prompt) / len(prompt) for prompt in prompts],
    }


def evaluate(
    model_dir: str,
    data_file: str,
    env_class: str,
    max_new_tokens: int,
    seed: int,
    *,
    limit: int | None = None,
    temperature: float = 0.0,
    samples: int = 1,
    batch_size: int = 16,
) -> dict:
    from . import data, rewards
    from .libraries import quiet_libraries
    from .storage import weight_digests

    started = time.time()
    rewards.get(env_class)
    quiet_libraries()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    rows = data.load_rows([data_file], env_class)
    if limit is not None:
        rows = rows[:limit]
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if samples > 1 and temperature <= 0:
        raise SystemExit("--samples > 1 needs --temperature > 0")
    scores, example = score(
        model,
        tokenizer,
        rows,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        temperature=temperature,
        samples=samples,
    )
    weights = weight_digests(model_dir)
    per_row = samples if temperature > 0 else 1  # `score` draws this many completions per row, in row order
    successes = [1.0 if s >= 1.0 else 0.0 for s in scores]
    return {
        **summarise(scores),
        **clustered_accuracy([successes[i : i + per_row] for i in range(0, len(successes), per_row)]),
        "prompts": len(rows),
        "model": os.path.abspath(model_dir),
        "data": os.path.abspath(data_file),
        "scorer": env_class,
        "sampling": {"temperature": temperature, "samples": per_row, "max_new_tokens": max_new_tokens, "seed": seed},
        "weights_sha256": next(iter(weights.values())) if len(weights) == 1 else weights,
        "seconds": round(time.time() - started, 2),
        "example": example,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rlaunch_trl_cpu.evaluate", description="score a model with a reward"
    )
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--env-class", required=True)
    parser.add_argument("--max-new-tokens", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args(argv)
    from .data import DataError
    from .rewards import UnknownRewardError

    try:
        result = evaluate(
            args.model,
            args.data,
            args.env_class,
            args.max_new_tokens,
            args.seed,
            limit=args.limit,
            temperature=args.temperature,
            samples=args.samples,
            batch_size=args.batch_size,
        )
    except (DataError, UnknownRewardError) as exc:
        sys.stderr.write(f"rlaunch_trl_cpu.evaluate: {exc}\n")
        return 2
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
