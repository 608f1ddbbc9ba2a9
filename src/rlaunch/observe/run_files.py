"""Tolerant, bounded readers of the files a run leaves behind.

Observers read files that other processes are writing: a missing file is None, a file caught
half-written on a store without atomic puts is None too (the next refresh sees it whole), and
a metrics log is read in bounded pieces so `rlaunch status` stays fast on a long run.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass, field
from typing import Any

from rlaunch import storage
from rlaunch.launch_config import schema
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.statefiles import CorruptStateError

# A metrics log larger than this is read as its head and its tail (status and the verdict need
# the first step, the last steps and whether steps increase; a plot reads everything).
METRICS_READ_LIMIT = 4 * 1024 * 1024
METRICS_HEAD_BYTES = 64 * 1024
_REPORTED: set[str] = set()  # damaged files already named in this process


def read_json(url: str) -> Any | None:
    """The JSON at `url`, None when it is missing or unreadable; a damaged file is named, with its
    fix, once on stderr (the view goes on without it)."""
    try:
        return storage.read_json(url)
    except CorruptStateError as exc:
        if exc.source not in _REPORTED:
            _REPORTED.add(exc.source)
            sys.stderr.write(f"warning: {exc}\n")
        return None
    except (ValueError, OSError):
        return None


def read_text(url: str) -> str | None:
    try:
        return storage.read_text(url)
    except (FileNotFoundError, OSError, UnicodeDecodeError):
        return None


def read_document(url: str) -> SkyRLLaunchConfig | None:
    """The launch document at `url` through its schema, or None (missing, unparsable or invalid)."""
    import yaml

    text = read_text(url)
    if text is None:
        return None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError:
        return None
    return schema.from_dict_tolerant(data)


def list_names(url: str) -> list[str]:
    try:
        return storage.list_names(url)
    except (OSError, ValueError):
        return []


@dataclass
class MetricsLog:
    """Parsed lines of a `metrics.jsonl` (possibly only its head and tail, see `complete`)."""

    url: str
    exists: bool = False
    records: list[dict[str, Any]] = field(default_factory=list)
    complete: bool = True  # False when the middle of a large file was skipped
    bad_lines: int = 0

    @property
    def steps(self) -> list[int]:
        return [r["step"] for r in self.records]


def _parse_lines(text: str, log: MetricsLog) -> None:
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            record = json.loads(line)
            record["step"] = int(record["step"])
        except (ValueError, KeyError, TypeError):
            log.bad_lines += 1
            continue
        log.records.append({k: _finite(v) for k, v in record.items()})


def _finite(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


def read_metrics(url: str, limit: int | None = METRICS_READ_LIMIT) -> MetricsLog:
    """The metrics log at `url`; with `limit`, a larger file is read as head + last `limit` bytes."""
    log = MetricsLog(url=url)
    try:
        fs, path = storage.filesystem(url)
        size = fs.size(path)
    except (FileNotFoundError, OSError):
        return log
    log.exists = True
    if size is None:
        size = 0
    try:
        if limit is None or size <= limit:
            _parse_lines(fs.cat_file(path).decode("utf-8", errors="replace"), log)
            return log
        head = fs.cat_file(path, start=0, end=METRICS_HEAD_BYTES).decode("utf-8", errors="replace")
        tail = fs.cat_file(path, start=size - limit, end=size).decode("utf-8", errors="replace")
    except (FileNotFoundError, OSError):
        return log
    log.complete = False
    # Drop the partial last line of the head and the partial first line of the tail.
    _parse_lines(head.rsplit("\n", 1)[0], log)
    _parse_lines(tail.split("\n", 1)[1] if "\n" in tail else "", log)
    return log
