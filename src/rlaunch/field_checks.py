"""Type checks for the frozen configuration objects: wrong types fail at construction, by name."""

from __future__ import annotations

from typing import Any


def require_int(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{owner}.{name} must be an int, got {value!r} ({type(value).__name__})")


def require_bool(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{owner}.{name} must be true or false, got {value!r} ({type(value).__name__})")


def require_str(owner: str, name: str, value: Any, *, allow_none: bool = False, non_empty: bool = True) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, str) or (non_empty and not value.strip()):
        raise TypeError(f"{owner}.{name} must be a non-empty string, got {value!r}")


def require_number(owner: str, name: str, value: Any) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TypeError(f"{owner}.{name} must be a number, got {value!r}")
