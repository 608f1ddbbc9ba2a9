"""Tiny assets built locally (nothing comes from a model hub), deterministic for a seed.

    python -m rlaunch_trl_cpu.tiny tokenizer --out DIR --seed S [--vocab-size 512]
    python -m rlaunch_trl_cpu.tiny model --tokenizer DIR --out DIR --seed S
                                         [--hidden-size 64 --layers 2 --heads 4 --kv-heads 2 --context-length 512]
    python -m rlaunch_trl_cpu.tiny data --out FILE.jsonl --rows N --seed S [--max-operand 9]

Each prints one JSON line describing what it wrote (with the sha256 of every file).

* tokenizer: byte-level BPE trained on synthetic arithmetic text; special tokens `<|endoftext|>`
  (pad), `<|im_start|>`, `<|im_end|>` (eos); a ChatML chat template; saved with `save_pretrained`.
* model: a randomly initialised tiny Qwen3 (tied embeddings), its generation config (eos =
  `<|im_end|>`, pad = `<|endoftext|>`), and the tokenizer saved beside it.
* data: SkyRL-shaped arithmetic prompt rows (`prompt`, `env_class`, `reward_spec.ground_truth`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
from typing import Any

PAD = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

_WORDS = (
    "the answer is what plus minus sum of and number result equals so we get first then add take "
    "away total value question think step compute two three four five six seven eight nine zero one"
).split()


def _files_sha256(directory: str) -> dict[str, str]:
    out = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
            out[name] = digest.hexdigest()
    return out


def _corpus(seed: int, lines: int = 8000) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        op = rng.choice("+-")
        c = a + b if op == "+" else a - b
        filler = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(0, 6)))
        out.append(f"user\nWhat is {a} {op} {b}?\nassistant\nThe answer is {c}. {filler}".strip())
    return out


def build_tokenizer(out: str, seed: int, vocab_size: int = 512) -> dict[str, Any]:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[PAD, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(_corpus(seed), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token=IM_END,
        pad_token=PAD,
        unk_token=None,
        bos_token=None,
        padding_side="left",
        model_max_length=512,
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    os.makedirs(out, exist_ok=True)
    tokenizer.save_pretrained(out)
    _portable_tokenizer_config(out)
    return {
        "kind": "tokenizer",
        "out": os.path.abspath(out),
        "seed": seed,
        "vocab_size": len(tokenizer),
        "eos_token": IM_END,
        "pad_token": PAD,
        "special_tokens": {t: tokenizer.convert_tokens_to_ids(t) for t in (PAD, IM_START, IM_END)},
        "files": _files_sha256(out),
    }


def _portable_tokenizer_config(directory: str) -> None:
    """transformers 5 writes `tokenizer_class: TokenizersBackend`, which transformers 4.x cannot
    load; the generic fast class name loads in both."""
    path = os.path.join(directory, "tokenizer_config.json")
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    config["tokenizer_class"] = "PreTrainedTokenizerFast"
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(config, handle, indent=2, sort_keys=True)
        handle.write("\n")


def build_model(
    tokenizer_dir: str,
    out: str,
    seed: int,
    *,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int = 2,
    context_length: int = 512,
) -> dict[str, Any]:
    import torch
    from transformers import AutoTokenizer, GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    eos_id = tokenizer.convert_tokens_to_ids(IM_END)
    pad_id = tokenizer.convert_tokens_to_ids(PAD)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=hidden_size // heads,
        max_position_embeddings=context_length,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id, bos_token_id=None)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    _portable_tokenizer_config(out)
    params = {id(p): p.numel() for p in model.parameters()}
    return {
        "kind": "model",
        "out": os.path.abspath(out),
        "seed": seed,
        "architecture": type(model).__name__,
        "model_type": config.model_type,
        "vocab_size": config.vocab_size,
        "hidden_size": hidden_size,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": config.head_dim,
        "max_position_embeddings": context_length,
        "num_parameters": sum(params.values()),
        "files": _files_sha256(out),
    }


def build_data(out: str, rows: int, seed: int, max_operand: int = 9) -> dict[str, Any]:
    rng = random.Random(seed)
    directory = os.path.dirname(os.path.abspath(out))
    os.makedirs(directory, exist_ok=True)
    with open(out, "w", encoding="utf-8") as handle:
        for _ in range(rows):
            a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
            row = {
                "prompt": [{"role": "user", "content": f"What is {a} + {b}?"}],
                "env_class": "arithmetic",
                "reward_spec": {"method": "rule", "ground_truth": str(a + b)},
            }
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    digest = hashlib.sha256(open(out, "rb").read()).hexdigest()
    return {"kind": "data", "out": os.path.abspath(out), "seed": seed, "rows": rows, "sha256": digest}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlaunch_trl_cpu.tiny", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    tok = sub.add_parser("tokenizer")
    tok.add_argument("--out", required=True)
    tok.add_argument("--seed", type=int, default=0)
    tok.add_argument("--vocab-size", type=int, default=512)
    mod = sub.add_parser("model")
    mod.add_argument("--tokenizer", required=True)
    mod.add_argument("--out", required=True)
    mod.add_argument("--seed", type=int, default=0)
    mod.add_argument("--hidden-size", type=int, default=64)
    mod.add_argument("--layers", type=int, default=2)
    mod.add_argument("--heads", type=int, default=4)
    mod.add_argument("--kv-heads", type=int, default=2)
    mod.add_argument("--context-length", type=int, default=512)
    dat = sub.add_parser("data")
    dat.add_argument("--out", required=True)
    dat.add_argument("--rows", type=int, default=64)
    dat.add_argument("--seed", type=int, default=0)
    dat.add_argument("--max-operand", type=int, default=9)
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.command == "tokenizer":
        info = build_tokenizer(args.out, args.seed, args.vocab_size)
    elif args.command == "model":
        info = build_model(
            args.tokenizer,
            args.out,
            args.seed,
            hidden_size=args.hidden_size,
            layers=args.layers,
            heads=args.heads,
            kv_heads=args.kv_heads,
            context_length=args.context_length,
        )
    else:
        info = build_data(args.out, args.rows, args.seed, args.max_operand)
    sys.stdout.write(json.dumps(info, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
