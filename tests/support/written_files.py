"""What a command wrote under a root: the tests that refuse before anything is built assert it is nothing."""

from __future__ import annotations

from pathlib import Path


def written(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []
