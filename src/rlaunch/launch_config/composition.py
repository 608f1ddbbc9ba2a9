"""Composing a recipe onto a runtime's base config (dotted paths: `rlaunch.dotted`, re-exported).

Composition is strict: a key the base config does not know, or a value of another type than the
base default, is a problem naming the path (and the closest known key), never silently kept.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlaunch.dotted import get_path, has_path, leaves, set_path

__all__ = ["BaseConfigShape", "RecipeProblem", "compose", "get_path", "has_path", "leaves", "set_path"]


@dataclass(frozen=True)
class RecipeProblem:
    code: str
    path: str
    value: Any
    message: str
    fix: str


@dataclass(frozen=True)
class BaseConfigShape:
    """What a base config's plain tree cannot say: `open_mappings` are free-form dicts (any key is
    accepted under them); `optional_sections` default to None and, when given as a mapping, take
    the keys of the tree recorded for them."""

    open_mappings: frozenset[str] = frozenset()
    optional_sections: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, raw: Mapping[str, Any] | None) -> BaseConfigShape:
        raw = raw or {}
        return cls(frozenset(raw.get("open_mappings") or ()), dict(raw.get("optional_sections") or {}))

    @property
    def stops(self) -> frozenset[str]:
        """Paths whose whole value is one setting (compared as a unit)."""
        return self.open_mappings | frozenset(self.optional_sections)


def compose(
    base: Mapping[str, Any], recipe: Mapping[str, Any], shape: BaseConfigShape | None = None
) -> tuple[dict[str, Any], list[RecipeProblem]]:
    """`recipe` laid over a deep copy of `base`; problems for unknown keys and type mismatches."""
    composed = copy.deepcopy(dict(base))
    problems: list[RecipeProblem] = []
    _merge(composed, recipe, "", problems, shape or BaseConfigShape())
    return composed, problems


def _not_a_mapping(path: str, value: Any) -> RecipeProblem:
    return RecipeProblem(
        "recipe.type_mismatch",
        path,
        value,
        f"{path} must be a mapping, got {value!r}",
        f"write {path} as a mapping of keys",
    )


def _merge_open(target: dict[str, Any], overlay: Mapping[str, Any]) -> None:
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge_open(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _merge(
    target: dict[str, Any],
    overlay: Mapping[str, Any],
    prefix: str,
    problems: list[RecipeProblem],
    shape: BaseConfigShape,
) -> None:
    for key, value in overlay.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if path in shape.open_mappings and key in target:
            if isinstance(value, Mapping) and isinstance(target[key], dict):
                _merge_open(target[key], value)
            elif value is None or isinstance(value, Mapping):
                target[key] = copy.deepcopy(value)
            else:
                problems.append(_not_a_mapping(path, value))
            continue
        if (
            path in shape.optional_sections
            and key in target
            and isinstance(value, Mapping)
            and not isinstance(target[key], Mapping)
        ):
            section = copy.deepcopy(dict(shape.optional_sections[path]))
            _merge(section, value, path, problems, shape)
            target[key] = section
            continue
        if key not in target:
            import difflib  # only for a mistake: a valid recipe never pays for it

            close = difflib.get_close_matches(str(key), [str(k) for k in target], n=1)
            known = sorted(str(k) for k in target)
            hint = (
                f"did you mean {prefix + '.' if prefix else ''}{close[0]}?"
                if close
                else f"remove {path}; keys known at this level: {', '.join(known[:12])}{', ...' if len(known) > 12 else ''}"
            )
            problems.append(
                RecipeProblem(
                    "recipe.unknown_key", path, value, f"{path} is not a key of the runtime's base config", hint
                )
            )
            continue
        default = target[key]
        if isinstance(default, Mapping):
            if not isinstance(value, Mapping):
                problems.append(_not_a_mapping(path, value))
                continue
            _merge(target[key], value, path, problems, shape)
            continue
        problem = type_problem(path, default, value)
        if problem is not None:
            problems.append(problem)
            continue
        target[key] = copy.deepcopy(value)


def type_problem(path: str, default: Any, value: Any) -> RecipeProblem | None:
    """A problem when `value` does not have the type of the base default (None default: any)."""
    if default is None:
        return None
    expected: str | None = None
    if isinstance(default, bool):
        expected = None if isinstance(value, bool) else "true or false"
    elif isinstance(default, int):
        expected = None if isinstance(value, int) and not isinstance(value, bool) else "an integer"
    elif isinstance(default, float):
        expected = None if isinstance(value, (int, float)) and not isinstance(value, bool) else "a number"
    elif isinstance(default, str):
        expected = None if isinstance(value, str) else "a string"
    elif isinstance(default, list):
        expected = None if isinstance(value, list) else "a list"
    if expected is None:
        return None
    fix = f"write {path} as {expected}"
    return RecipeProblem("recipe.type_mismatch", path, value, f"{path}={value!r} must be {expected}", fix)
