"""Which weights a model directory holds, by sha256: what the run record and an evaluation name.

One digest for the model: its weight file's sha256, or for a sharded model the sha256 of the
sorted `name sha256` lines of its shards, so a model is named by one value however it is split.
Plain Python, so the trainer's evidence and the evaluation share it without importing SkyRL.
"""

from __future__ import annotations

import hashlib
import os

WEIGHT_SUFFIXES = (".safetensors", ".bin")


def weight_files(directory: str) -> dict[str, str]:
    """{file name: sha256} of every weight file directly in `directory` (empty: none, or no directory)."""
    files: dict[str, str] = {}
    if not os.path.isdir(directory):
        return files
    for name in sorted(os.listdir(directory)):
        if name.endswith(WEIGHT_SUFFIXES):
            digest = hashlib.sha256()
            with open(os.path.join(directory, name), "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
            files[name] = digest.hexdigest()
    return files


def weights_sha256(files: dict[str, str]) -> str | None:
    """The model's one digest over `weight_files` (None: it has no weight file)."""
    if not files:
        return None
    if len(files) == 1:
        return next(iter(files.values()))
    return hashlib.sha256("".join(f"{n} {h}\n" for n, h in sorted(files.items())).encode()).hexdigest()
