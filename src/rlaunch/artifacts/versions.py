"""Deferred versions: `--version` and `--override NAME=VERSION` reach builders through a context.

A builder calls `resolve_version(name, None)`; inside an active build context it gets the
override for `name` or the run-wide default. An explicit version in code always wins. Overrides
that no builder consulted are reported so typos do not pass silently. The shell's recipe
overrides (`--set dotted.key=value`) travel the same way: an RL spec built in the context takes
them (`rlaunch.skyrl.values.overrides`).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlaunch.artifacts.identity import validate_version


@dataclass
class VersionCodex:
    default: str
    overrides: Mapping[str, str] = field(default_factory=dict)
    _used: set[str] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        validate_version(self.default, field="--version")
        for name, version in self.overrides.items():
            validate_version(version, field=f"--override {name}")

    def version_for(self, name: str) -> str:
        if name in self.overrides:
            self._used.add(name)
            return self.overrides[name]
        return self.default

    def unused_overrides(self) -> list[str]:
        return sorted(set(self.overrides) - self._used)


@dataclass(frozen=True)
class BuildContext:
    """What builders read while a main builds its graph: the versions, and the recipe overrides
    (dotted key -> typed value, in the order given) every RL spec built here lays over its recipe."""

    versions: VersionCodex
    recipe_overrides: Mapping[str, Any] = field(default_factory=dict)


_current: contextvars.ContextVar[BuildContext | None] = contextvars.ContextVar("rlaunch_build_context", default=None)


@contextlib.contextmanager
def build_context(ctx: BuildContext) -> Iterator[BuildContext]:
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)


def current_build_context() -> BuildContext | None:
    return _current.get()


def resolve_version(name: str, version: str | None) -> str:
    """`version` if given, else the active build context's version for `name`."""
    if version is not None:
        return validate_version(version, field=f"version of {name}")
    ctx = current_build_context()
    if ctx is None:
        raise ValueError(
            f"no version given for {name!r} and no active build context; pass version=... or build "
            "the graph inside a main decorated with @build_options / @rl_build_options"
        )
    return ctx.versions.version_for(name)
