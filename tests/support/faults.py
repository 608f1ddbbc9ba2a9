"""Helpers for fault tests: a real small filesystem to fill, mounted for the test and removed after.

We run as root, so permissions alone cannot make a disk full or a prefix read-only; a tmpfs of a
few pages can. Where mounting is not permitted the test skips with one line why.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    """`path` as a fresh tmpfs of `size` (e.g. "2m") for the block; unmounted after."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root and CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=True)


def fill(directory: Path) -> Path:
    """Write a file in `directory` until its filesystem is full; returns it (remove it to free the space)."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 4096)
    return filler
