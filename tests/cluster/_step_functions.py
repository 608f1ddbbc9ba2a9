"""Step functions the step-job tests run: top-level, so a step job's task imports them by name."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import Artifact


@dataclass(frozen=True)
class Rows(Artifact):
    rows: int = 0
    read_from: str = ""


def write_rows(config: dict[str, Any]) -> Rows:
    storage.write_text_atomic(storage.join(config["output_path"], "rows.txt"), "a\nb\nc\n")
    return Rows(path=config["output_path"], rows=3)


def count_rows(config: dict[str, Any]) -> Rows:
    """Reads its input through the config, which the task points at the staged copy."""
    with open(config["rows"], encoding="utf-8") as handle:
        rows = len(handle.read().splitlines())
    storage.write_text_atomic(storage.join(config["output_path"], "count.txt"), str(rows))
    return Rows(path=config["output_path"], rows=rows, read_from=config["rows"])


def fail_unless_marker(config: dict[str, Any]) -> Rows:
    if not os.path.exists(config["marker"]):  # until then, a data-format error as a trainer would raise it
        raise KeyError("prompt")
    return Rows(path=config["output_path"], rows=1)


def sleep_long(config: dict[str, Any]) -> Rows:
    storage.write_text_atomic(config["started"], "started")
    time.sleep(300)
    return Rows(path=config["output_path"])


def denied_on_output(config: dict[str, Any]) -> Rows:
    """Its own output refused, as a storage remounted read-only under a running job refuses it."""
    raise PermissionError(13, "Permission denied", storage.join(config["output_path"], "rows.txt"))
