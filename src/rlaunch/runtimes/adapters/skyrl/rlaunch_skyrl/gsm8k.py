"""GSM8K for SkyRL: the hub's rows in SkyRL's prompt format, and the answer rule that scores them.

    python -m rlaunch_skyrl.gsm8k --source DIR --out DIR --instruction TEXT \\
        --split train.parquet=main/train-00000-of-00001.parquet --split test.parquet=main/test-...

A hub GSM8K row has `question` and `answer`, whose final answer follows `####`. Each becomes the
row SkyRL's gsm8k environment reads: `prompt` (one user message: the question, then the
instruction), `env_class` (`gsm8k`), `reward_spec` (`{method: rule, ground_truth}`: the final
answer, commas dropped) and `extra_info` (split, index, the question and the whole answer). Every
file matching a split's pattern (relative to `--source`) goes into that split's parquet file under
`--out`. Prints one JSON line: `{"splits": {file: rows}}`.

The answer rule (`answer_of`, `score`) is plain Python; pyarrow is imported by the conversion
alone, so the rule can be imported, and tested, where pyarrow and vLLM are not installed.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from typing import Any

ENV_CLASS = "gsm8k"
COLUMNS = ("question", "answer")
_MARKED = re.compile(r"####\s*(-?[\d,]+(?:\.\d+)?)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class GSM8KError(ValueError):
    """Source data that is not GSM8K as the hub publishes it (names the file, the column or the row)."""


def marked_answer(text: str) -> str | None:
    """The number after `####`, commas dropped (None: the text marks no answer)."""
    marked = _MARKED.search(text)
    return marked.group(1).replace(",", "") if marked else None


def answer_of(completion: str) -> str | None:
    """A completion's answer: the number after `####` if it marks one, else its last number
    (commas dropped); None when it holds no number."""
    marked = marked_answer(completion)
    if marked is not None:
        return marked
    numbers = _NUMBER.findall(completion.replace(",", ""))
    return numbers[-1] if numbers else None


def score(completion: str, ground_truth: str) -> float:
    """1.0 when the completion's answer equals the ground truth as a number, else 0.0."""
    answer, truth = answer_of(completion), ground_truth.replace(",", "").strip()
    if answer is None:
        return 0.0
    try:
        return 1.0 if float(answer) == float(truth) else 0.0
    except ValueError:
        return 1.0 if answer == truth else 0.0


def prompt_row(question: str, answer: str, instruction: str, split: str, index: int, where: str) -> dict[str, Any]:
    """One SkyRL row of a hub row; `where` names the file and row in the refusal of an unmarked answer."""
    truth = marked_answer(answer)
    if truth is None:
        raise GSM8KError(f"{where}: its answer marks no final answer with '####' ({answer[-80:]!r}); is this GSM8K?")
    return {
        "prompt": [{"role": "user", "content": f"{question} {instruction}"}],
        "env_class": ENV_CLASS,
        "reward_spec": {"method": "rule", "ground_truth": truth},
        "extra_info": {"split": split, "index": index, "question": question, "answer": answer},
    }


def convert(source: str, out: str, splits: dict[str, str], instruction: str) -> dict[str, int]:
    """Write each split (`{output file: source pattern}`) under `out`; returns its row counts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    counts: dict[str, int] = {}
    os.makedirs(out, exist_ok=True)
    for target, pattern in splits.items():
        files = sorted(glob.glob(os.path.join(source, pattern)))
        if not files:
            raise GSM8KError(f"--split {target}={pattern}: no file under {source} matches {pattern!r}")
        split = target.split(".", 1)[0]
        rows: list[dict[str, Any]] = []
        for path in files:
            table = pq.read_table(path)
            for column in COLUMNS:
                if column not in table.column_names:
                    raise GSM8KError(
                        f"{path}: no column {column!r} (it has {table.column_names}); a GSM8K split has "
                        f"{list(COLUMNS)}: point --split {target} at the hub's GSM8K files"
                    )
            pairs = zip(table.column("question").to_pylist(), table.column("answer").to_pylist())
            for number, (question, answer) in enumerate(pairs):
                where = f"{path} row {number}"
                rows.append(prompt_row(question, answer, instruction, split, len(rows), where))
        pq.write_table(pa.Table.from_pylist(rows), os.path.join(out, target))
        counts[target] = len(rows)
    return counts


def _split(value: str) -> tuple[str, str]:
    target, sep, pattern = value.partition("=")
    if not sep or not target.endswith(".parquet") or not pattern:
        raise argparse.ArgumentTypeError(
            f"--split {value!r} must be OUTPUT.parquet=PATTERN, e.g. train.parquet=main/train-*"
        )
    return target, pattern


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlaunch_skyrl.gsm8k", description="GSM8K to SkyRL's rows")
    parser.add_argument("--source", required=True, help="the staged hub snapshot")
    parser.add_argument("--out", required=True, help="the directory to write the splits in")
    parser.add_argument("--instruction", required=True, help="appended to every question")
    parser.add_argument("--split", type=_split, action="append", required=True, help="OUTPUT.parquet=PATTERN")
    args = parser.parse_args(argv)
    try:
        counts = convert(args.source, args.out, dict(args.split), args.instruction)
    except GSM8KError as exc:
        sys.stderr.write(f"rlaunch_skyrl.gsm8k: {exc}\n")
        return 2
    sys.stdout.write(json.dumps({"splits": counts}, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
