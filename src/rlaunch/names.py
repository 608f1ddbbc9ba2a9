"""Names: job names every scheduler accepts (DNS-label safe), shared by the launch document and
backends, and which artifact versions are mutable (shared by the artifact graph and the gates)."""

from __future__ import annotations

import re

MAX_JOB_NAME = 63
_MUTABLE = re.compile(r"dev|[a-z0-9][a-z0-9_.-]*-dev")


def is_mutable(version: str) -> bool:
    """True for `dev` / `<label>-dev`: such outputs are rebuilt on every run (any other valid
    version is a calendar version, immutable once built)."""
    return isinstance(version, str) and bool(_MUTABLE.fullmatch(version))


def sanitize_job_name(name: str) -> str:
    """Lowercase, `[a-z0-9.-]` only, no leading/trailing separators, at most 63 characters."""
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-.")
    cleaned = re.sub(r"-{2,}", "-", cleaned)[:MAX_JOB_NAME].rstrip("-.")
    if not cleaned:
        raise ValueError(f"job name {name!r} has no usable characters; use letters or digits")
    return cleaned
