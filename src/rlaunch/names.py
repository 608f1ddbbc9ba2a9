"""Job names every scheduler accepts (DNS-label safe), shared by the launch document and backends."""

from __future__ import annotations

import re

MAX_JOB_NAME = 63


def sanitize_job_name(name: str) -> str:
    """Lowercase, `[a-z0-9.-]` only, no leading/trailing separators, at most 63 characters."""
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-.")
    cleaned = re.sub(r"-{2,}", "-", cleaned)[:MAX_JOB_NAME].rstrip("-.")
    if not cleaned:
        raise ValueError(f"job name {name!r} has no usable characters; use letters or digits")
    return cleaned
