"""What every preflight rule builds its violations with."""

from __future__ import annotations

from typing import Any

from rlaunch.skyrl.errors import PreflightError


def violation(code: str, fields: list[str], message: str, fix: str, **values: Any) -> PreflightError:
    return PreflightError(code, fields, message, fix, values)


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0] if n > 0 else []
