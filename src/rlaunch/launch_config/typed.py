"""A strict decoder from plain mappings to frozen dataclasses.

Unknown keys and wrong types are errors that name the dotted path, the value and what was
expected; every problem in a document is reported at once. `bool` is never accepted for `int`
(YAML's `1` is not `true`), an `int` is accepted where a `float` is expected, and no number may be
NaN or infinite, wherever it appears.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from rlaunch.errors import UserError

T = TypeVar("T")


class DocumentError(UserError, ValueError):
    """Every problem found while reading or decoding a document, each naming its path and fix."""

    def __init__(self, problems: list[str], what: str = "launch document"):
        self.problems = problems
        if len(problems) == 1:
            super().__init__(f"{what} is invalid: {problems[0]}")
        else:
            super().__init__(
                f"{what} is invalid ({len(problems)} problem(s)):\n" + "\n".join(f"  - {p}" for p in problems)
            )


def decode(cls: type[T], data: Any, *, what: str = "launch document") -> T:
    problems: list[str] = []
    value: T = _decode(cls, data, "", problems)
    if problems:
        raise DocumentError(problems, what)
    return value


def encode(value: Any) -> Any:
    """The plain-data form of a decoded dataclass (field order preserved)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def _describe(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _decode(tp: Any, data: Any, path: str, problems: list[str]) -> Any:
    where = path or "<root>"
    origin = typing.get_origin(tp)
    if tp is Any:
        _check_finite(data, path, problems)
        return data
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if data is None and type(None) in options:
            return None
        non_none = [o for o in options if o is not type(None)]
        if len(non_none) == 1 and dataclasses.is_dataclass(non_none[0]) and isinstance(data, Mapping):
            # an optional section given as a mapping: its own problems say more than "expected X or None"
            return _decode(non_none[0], data, path, problems)
        for option in non_none:
            trial: list[str] = []
            value = _decode(option, data, path, trial)
            if not trial:
                return value
        problems.append(f"{where}: expected {' or '.join(_describe(o) for o in options)}, got {data!r}")
        return None
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if data not in allowed or type(data) is not type(allowed[0]):
            problems.append(f"{where}: {data!r} is not one of {list(allowed)}")
        return data
    if dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, data, path, problems)
    if origin in (list, tuple):
        if not isinstance(data, (list, tuple)):
            problems.append(f"{where}: expected a list, got {data!r}")
            return ()
        (item_tp, *_) = typing.get_args(tp) or (Any,)
        return tuple(_decode(item_tp, item, f"{path}[{i}]", problems) for i, item in enumerate(data))
    if origin in (dict, Mapping, typing.Mapping) or tp in (dict, Mapping):
        if not isinstance(data, Mapping):
            problems.append(f"{where}: expected a mapping, got {data!r}")
            return {}
        args = typing.get_args(tp)
        value_tp = args[1] if len(args) == 2 else Any
        out = {}
        for key, item in data.items():
            if not isinstance(key, str):
                problems.append(f"{where}: key {key!r} must be a string")
                continue
            out[key] = _decode(value_tp, item, f"{path}.{key}" if path else key, problems)
        return out
    if tp is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            if not math.isfinite(data):
                problems.append(f"{where}: {data!r} is not a finite number; write a finite number")
                return None
            return float(data)
        problems.append(f"{where}: expected a number, got {data!r}")
        return None
    if tp is int:
        if isinstance(data, int) and not isinstance(data, bool):
            return data
        problems.append(f"{where}: expected an integer, got {data!r}")
        return None
    if tp in (bool, str):
        if type(data) is tp:
            return data
        problems.append(f"{where}: expected {tp.__name__}, got {data!r}")
        return None
    raise TypeError(f"typed decoder cannot handle {tp!r} at {where}")


def _check_finite(data: Any, path: str, problems: list[str]) -> None:
    """Free-form sections (the recipe) hold no NaN or infinity either."""
    if isinstance(data, float) and not math.isfinite(data):
        problems.append(f"{path or '<root>'}: {data!r} is not a finite number; write a finite number")
    elif isinstance(data, Mapping):
        for key, item in data.items():
            _check_finite(item, f"{path}.{key}" if path else str(key), problems)
    elif isinstance(data, (list, tuple)):
        for i, item in enumerate(data):
            _check_finite(item, f"{path}[{i}]", problems)


def _decode_dataclass(cls: Any, data: Any, path: str, problems: list[str]) -> Any:
    where = path or "<root>"
    if not isinstance(data, Mapping):
        problems.append(f"{where}: expected a mapping for {cls.__name__}, got {data!r}")
        return None
    before = len(problems)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    for key in data:
        if key not in fields:
            problems.append(f"{path + '.' if path else ''}{key}: unknown key; {cls.__name__} accepts {sorted(fields)}")
    kwargs: dict[str, Any] = {}
    for name, f in fields.items():
        sub = f"{path}.{name}" if path else name
        if name in data:
            kwargs[name] = _decode(hints[name], data[name], sub, problems)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            problems.append(f"{sub}: required key is missing")
    if len(problems) > before:
        return None
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        problems.append(f"{where}: {exc}")
        return None
