"""Dotted key paths over nested mappings: `get_path(tree, "trainer.policy.model.path")`.

A recipe, a launch document read as data and a run record are nested mappings that every floor
addresses by dotted path; this is the one implementation (the adapters keep their own, as they
cannot import rlaunch: see ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

_MISSING = object()


def get_path(tree: Any, dotted: str, default: Any = _MISSING) -> Any:
    """`tree["a"]["b"]` for `"a.b"`; `default` where a part is missing (KeyError without one)."""
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            if default is _MISSING:
                raise KeyError(dotted)
            return default
        node = node[part]
    return node


def has_path(tree: Any, dotted: str) -> bool:
    absent = object()
    return get_path(tree, dotted, absent) is not absent


def set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    """Set `dotted` in `tree`, creating intermediate mappings; a non-mapping on the way is an error."""
    parts = dotted.split(".")
    node = tree
    for i, part in enumerate(parts[:-1]):
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        if not isinstance(child, dict):
            raise ValueError(f"{'.'.join(parts[: i + 1])} must be a mapping to hold {dotted}; got {child!r}")
        node = child
    node[parts[-1]] = value


def leaves(
    tree: Mapping[str, Any], prefix: str = "", *, stop: frozenset[str] = frozenset()
) -> Iterator[tuple[str, Any]]:
    """Every (dotted path, value) whose value is not a mapping (lists are leaves); a path in `stop`
    is one leaf whatever its value (a free-form mapping)."""
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value and path not in stop:
            yield from leaves(value, path, stop=stop)
        else:
            yield path, value
