"""Human resource sizes ("16GB", "512MiB", "4TB") as byte counts."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3, "kb": 10**3, "ki": 2**10, "kib": 2**10,
    "m": 10**6, "mb": 10**6, "mi": 2**20, "mib": 2**20,
    "g": 10**9, "gb": 10**9, "gi": 2**30, "gib": 2**30,
    "t": 10**12, "tb": 10**12, "ti": 2**40, "tib": 2**40,
}  # fmt: skip
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(value: str | int, *, field: str = "size") -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"{field}={value} cannot be negative")
        return value
    match = _SIZE.match(str(value))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _UNITS:
        raise ValueError(f"{field}={value!r} is not a size; write it like 16GB, 512MiB or 4TB")
    return int(float(match.group(1)) * _UNITS[unit])


def format_size(num_bytes: int) -> str:
    for unit, factor in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if num_bytes >= factor:
            return f"{num_bytes / factor:.3g}{unit}"
    return f"{num_bytes}B"
