"""Measurements of the pinned training stack, kept under the runtime cache for the inputs that decide them.

Some evidence tiers ask the trl-cpu venv's torch and transformers what they build or allocate
(parameter counts on the meta device, the memory tracker's peaks under `FakeTensorMode`). Those
answers draw nothing at random: they are a function of the script that asks, what it is asked, and
the venv (named by its lock's digest). So each is kept, keyed by all three, under
`$RLAUNCH_RUNTIME_CACHE/measurements/`, next to the venv it was measured in: a change to any input
measures again, and the rlaunch side it is compared with is computed on every run.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from rlaunch.runtimes.environment import cache_root


def _path(script: Path, python: str, question: Any) -> Path:
    key = json.dumps(
        {"script": hashlib.sha256(script.read_bytes()).hexdigest(), "python": python, "question": question},
        sort_keys=True,
    )
    return cache_root() / "measurements" / script.stem / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def kept(script: Path, python: str, question: Any) -> Any | None:
    """What `script` in `python` answered to `question` before, or None."""
    path = _path(script, python, question)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def keep(script: Path, python: str, question: Any, answer: Any) -> None:
    """Keep `answer`, whole or not at all (a reader never sees half of one)."""
    path = _path(script, python, question)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(answer), encoding="utf-8")
    os.replace(partial, path)
