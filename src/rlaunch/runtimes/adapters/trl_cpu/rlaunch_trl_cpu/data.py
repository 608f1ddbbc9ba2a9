"""Prompt rows in SkyRL's dataset shape, from local .jsonl or .parquet files.

A row::

    {"prompt": [{"role": "user", "content": "What is 3 + 4?"}],
     "env_class": "arithmetic",
     "reward_spec": {"method": "rule", "ground_truth": "7"}}

`env_class` is optional (the recipe's `environment.env_class` applies); a plain-string prompt is
taken as one user message.
"""

from __future__ import annotations

import json
import os
from typing import Any


class DataError(ValueError):
    pass


def _read_file(path: str) -> list[dict[str, Any]]:
    path = os.path.expanduser(path)
    if not os.path.exists(path):
        raise DataError(f"data.train_data: {path} does not exist")
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    if path.endswith((".jsonl", ".json")):
        rows = []
        with open(path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as exc:
                        raise DataError(f"{path}:{number}: not a JSON line ({exc})") from exc
        return rows
    raise DataError(f"data.train_data: {path} is neither .jsonl nor .parquet")


def normalise(row: dict[str, Any], default_env_class: str, where: str) -> dict[str, Any]:
    prompt = row.get("prompt")
    if isinstance(prompt, str):
        prompt = [{"role": "user", "content": prompt}]
    if not isinstance(prompt, list) or not prompt or not all(isinstance(m, dict) for m in prompt):
        raise DataError(f"{where}: 'prompt' must be a non-empty list of chat messages")
    messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in prompt]
    spec = row.get("reward_spec") or {}
    if "ground_truth" not in spec:
        raise DataError(f"{where}: 'reward_spec.ground_truth' is missing")
    truth = spec["ground_truth"]
    return {
        "prompt": messages,
        "ground_truth": truth if isinstance(truth, str) else json.dumps(truth),
        "env_class": str(row.get("env_class") or default_env_class),
    }


def load_rows(files: list[str], default_env_class: str) -> list[dict[str, Any]]:
    if isinstance(files, str):
        files = [files]
    if not files:
        raise DataError("data.train_data is empty: name at least one .jsonl or .parquet file")
    out = []
    for path in files:
        for index, row in enumerate(_read_file(path)):
            out.append(normalise(row, default_env_class, f"{path} row {index}"))
    return out
