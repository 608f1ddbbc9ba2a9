"""Canonical JSON and fingerprints: the content half of identity.

A fingerprint is the sha256 of the canonical JSON of a step's config built under a placeholder
context. Anything that would not encode identically in every process (callables, objects whose
repr is a memory address, unknown types) is refused with the path to the offending value.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import hashlib
import json
import math
import pathlib
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from rlaunch.errors import UserError

SHORT_LENGTH = 12


class CanonicalizationError(UserError, TypeError):
    """A config value that cannot be encoded deterministically."""


def qualified_name(cls: type) -> str:
    """`module.QualName` of a class, naming the module as it is imported, not as `__main__`.

    `python -m experiments.hello` runs that module as `__main__`; the same class imported from
    another process (a test, a coordinator replaying the module) lives in `experiments.hello`.
    Both must give one name, or the fingerprint and the stored result type would differ.
    """
    module = cls.__module__
    if module == "__main__":
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is not None and spec.name:
            module = spec.name
    return f"{module}.{cls.__qualname__}"


def canonical_value(value: Any, path: str = "config") -> Any:
    """Convert `value` to plain JSON data with a deterministic form, or raise naming `path`."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise CanonicalizationError(f"{path}: {value!r} has no canonical JSON form; use a string or None")
        return value
    if isinstance(value, enum.Enum):
        return canonical_value(value.value, path)
    if isinstance(value, pathlib.PurePath):
        return str(value)
    if isinstance(value, _dt.timedelta):
        return {"__timedelta__": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, type):
        return qualified_name(value)
    step_identity = getattr(value, "__artifact_identity__", None)
    if callable(step_identity):
        return step_identity()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: canonical_value(getattr(value, f.name), f"{path}.{f.name}")
            for f in dataclasses.fields(value)
            if f.compare
        }
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalizationError(f"{path}: mapping key {key!r} is not a string; use string keys")
            out[key] = canonical_value(item, f"{path}.{key}")
        return out
    if isinstance(value, (list, tuple)):
        return [canonical_value(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        members = [canonical_value(item, f"{path}{{}}") for item in value]
        return {"__set__": sorted(members, key=lambda m: json.dumps(m, sort_keys=True))}
    if callable(value):
        raise CanonicalizationError(
            f"{path}: {value!r} is a callable; a config must hold data, not functions "
            "(refer to registered names instead)"
        )
    raise CanonicalizationError(
        f"{path}: cannot canonicalise {type(value).__qualname__} value {value!r}; "
        "convert it to plain data (str, int, float, bool, list, dict or a dataclass)"
    )


def canonical_json(value: Any) -> str:
    """The one text form of `value` that every process agrees on."""
    return json.dumps(canonical_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def fingerprint_hash(payload: str) -> str:
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def short(fingerprint: str) -> str:
    return fingerprint[:SHORT_LENGTH]


ABSENT = object()  # a side of a difference where the key is missing


def differences(old: Any, new: Any, path: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Each place two canonical values differ, in key order: its dotted path and both values
    (`ABSENT` where one side lacks the key); lists of unequal length differ as a whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            sub = f"{path}.{key}" if path else key
            if key not in old or key not in new:
                yield sub, old.get(key, ABSENT), new.get(key, ABSENT)
            else:
                yield from differences(old[key], new[key], sub)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new)):
            yield from differences(a, b, f"{path}[{i}]")
    elif old != new:
        yield path or "<root>", old, new


def diff_paths(old: Any, new: Any, path: str = "") -> list[str]:
    """Dotted paths at which two canonical values differ (for drift warnings)."""
    return [where for where, _, _ in differences(old, new, path)]
