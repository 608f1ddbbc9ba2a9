"""Deferred versions: `--version` and `--override NAME=VERSION` reach builders through a context.

A builder calls `resolve_version(name, None)`; inside an active build context it gets the
override for `name` or the run-wide default. An explicit version in code always wins. Overrides
that no builder consulted are reported so typos do not pass silently. The shell's recipe
overrides (`--set dotted.key=value`) travel the same way: an RL spec built in the context takes
them (`rlaunch.skyrl.values.overrides`). A sweep (`--sweep`) builds the main once per variant, each
in a context naming its variant: a step that differs from the other variants' takes the variant's
label as a suffix of its name (`variant_name`), a step that does not is shared.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rlaunch.artifacts.identity import validate_name, validate_version
from rlaunch.runs.sweep import SweepMembership

T = TypeVar("T")


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
    variant: SweepMembership | None = None  # the sweep variant this graph is built for (`--sweep`, `variants`)
    in_code: bool = False  # the variant is a choice declared in Python (`variants`), not recipe values
    declared: list[SweepMembership] = field(default_factory=list)  # every `variants` choice built here

    def variant_name(self, name: str) -> str:
        """`name` as this variant's step holds it: the variant's label as a suffix (`smoke/rl.lr-1e-3`)."""
        if self.variant is None or name.endswith(f".{self.variant.variant}"):
            return name
        return f"{name}.{self.variant.variant}"

    def is_variants(self, name: str) -> bool:
        """Whether the step named `name` is this variant's own (its name carries the label)."""
        return self.variant is not None and name.endswith(f".{self.variant.variant}")


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


def variant_name(name: str, deps: tuple[Any, ...]) -> str:
    """A step's name in the active sweep variant: suffixed with the variant's label when one of its
    `deps` is the variant's own (it differs from the other variants' steps), so its output path,
    records and checkpoints are its own; unchanged outside a sweep or when every dep is shared."""
    ctx = current_build_context()
    if ctx is None or ctx.variant is None or not any(ctx.is_variants(getattr(dep, "name", "")) for dep in deps):
        return name
    return ctx.variant_name(name)


def variants(axis: str, choices: Mapping[str, T]) -> Iterator[T]:
    """A sweep declared in Python, over what recipe values cannot say (a spec, a role plan): each
    choice is a variant labelled by its key, and the steps built while it is current are built as
    that variant's (its RL steps, and every step that depends on one, take the label as a suffix;
    the rest are shared). The sweep is named `{axis}@{version}~sweep-{digest of axis and labels}`;
    each variant's `settings` are `{axis: label}`. It is one submission, planned in one table, like
    `--sweep` (which it does not combine with)::

        for roles in variants("role_plan", {"tp1": plan(tp=1), "tp2": plan(tp=2)}):
            steps.append(rl_step(model, data, roles=roles))
    """
    import hashlib
    import json

    from rlaunch.names import MAX_LABEL, check_name
    from rlaunch.runs.sweep import MARK

    ctx = current_build_context()
    if ctx is None:
        raise ValueError("variants(...) builds steps: call it inside a main decorated with @rl_build_options")
    if ctx.variant is not None:
        raise ValueError(
            f"variants({axis!r}, ...) inside variant {ctx.variant.variant!r}: a sweep is one grid; declare one "
            "variants(...) and no --sweep"
        )
    check_name(axis, field="variants(axis)", max_length=MAX_LABEL, segments=True)
    labels = list(choices)
    if len(labels) < 2:
        raise ValueError(f"variants({axis!r}, ...) needs at least two choices, got {labels}")
    for label in labels:
        validate_name(f"x.{label}", field=f"variants({axis!r}) label {label!r}")
    digest = hashlib.sha256(json.dumps([axis, labels]).encode()).hexdigest()[:8]
    name = f"{axis}@{ctx.versions.default}{MARK}{digest}"
    for label, choice in choices.items():
        member = SweepMembership(name, label, {axis: label})
        ctx.declared.append(member)
        token = _current.set(dataclasses.replace(ctx, variant=member, in_code=True))
        try:
            yield choice
        finally:
            _current.reset(token)


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
