"""A run's membership of a sweep: which sweep, which variant, what the variant set.

A sweep (`--sweep dotted.key=v1,v2,v3`) is one submission whose variants are each their own RL
artifact (the variant label is the readable suffix of its step name). Every variant's run record
carries `"sweep": SweepMembership.to_dict()` at its top level, so a reader (`rlaunch runs`,
`rlaunch compare`) groups the records of one sweep by `name` and tells the variants apart by
`variant` and `settings` without parsing step names. The launch document carries it to the host
(`run.sweep`), the only boundary to the trainer's side.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from rlaunch.names import MAX_LABEL, check_name

RECORD_KEY = "sweep"  # the run record's top-level field
LABEL = "rlaunch.sweep"  # the coordinator job's label: the sweep's name
MARK = "~sweep-"  # what a sweep's name holds and an artifact's identity never does


@dataclass(frozen=True)
class SweepMembership:
    """`name`: the same for every variant of one sweep (the terminal step's name and version and a
    digest of the grid); `variant`: the label its step names end in; `settings`: dotted recipe key
    -> the value this variant sets (a YAML scalar), in the order the grid declares the keys."""

    name: str
    variant: str
    settings: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_name(self.name, field="sweep.name", max_length=MAX_LABEL, segments=True)
        check_name(self.variant, field="sweep.variant", max_length=MAX_LABEL)
        if not isinstance(self.settings, Mapping) or not all(isinstance(k, str) and k for k in self.settings):
            raise TypeError(f"sweep.settings must map dotted recipe keys to values, got {self.settings!r}")
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "variant": self.variant, "settings": dict(self.settings)}

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> SweepMembership:
        """The membership a record or document holds; ValueError naming what is missing or wrong."""
        if not isinstance(value, Mapping):
            raise ValueError(f"sweep must be an object with name, variant and settings, got {value!r}")
        missing = [key for key in ("name", "variant", "settings") if key not in value]
        if missing:
            raise ValueError(f"sweep lacks {', '.join(missing)}: {dict(value)!r}")
        extra = sorted(set(value) - {"name", "variant", "settings"})
        if extra:
            raise ValueError(f"sweep has unknown fields {', '.join(extra)}: {dict(value)!r}")
        try:
            return cls(value["name"], value["variant"], value["settings"])
        except TypeError as exc:
            raise ValueError(str(exc)) from None


def of_record(record: Mapping[str, Any] | None) -> SweepMembership | None:
    """The sweep a run record belongs to (None: not a sweep's, or no record)."""
    value = (record or {}).get(RECORD_KEY)
    return None if value is None else SweepMembership.from_dict(value)


@dataclass(frozen=True)
class Axis:
    """One swept key and its values, each kept with the text it was given (`1e-3`): the text names
    the variant, the value (a YAML scalar) is what the recipe gets."""

    key: str
    values: tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Grid:
    """`--sweep KEY=V1,V2,...`, repeatable: every combination of the axes is one variant."""

    axes: tuple[Axis, ...]

    def __post_init__(self) -> None:
        keys = [axis.key for axis in self.axes]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} is swept twice; give each key one --sweep KEY=V1,V2,...")
        for axis in self.axes:
            texts = [text for text, _ in axis.values]
            if len(axis.values) < 2 or len(set(texts)) != len(texts):
                raise ValueError(
                    f"--sweep {axis.key}={','.join(texts)} needs at least two distinct values; "
                    f"set one value with --set {axis.key}=VALUE"
                )
        labels = self._labels(self._combinations())
        clashing = sorted({label for label in labels if labels.count(label) > 1})
        if clashing:
            raise ValueError(
                f"two variants would both be labelled {clashing[0]!r} (values differ only in characters a "
                "name cannot hold); write the values so they differ in letters, digits, '.', '_' or '-'"
            )

    def digest(self) -> str:
        """Eight hex digits naming the grid (keys and value texts, in order)."""
        import hashlib
        import json

        grid = [[axis.key, [text for text, _ in axis.values]] for axis in self.axes]
        return hashlib.sha256(json.dumps(grid).encode()).hexdigest()[:8]

    def variants(self, sweep_name: str) -> tuple[SweepMembership, ...]:
        """Every combination, in the order the values were given; each labelled by what it sets."""
        combinations = self._combinations()
        return tuple(
            SweepMembership(
                sweep_name, label, {axis.key: value for axis, (_, value) in zip(self.axes, combo, strict=True)}
            )
            for label, combo in zip(self._labels(combinations), combinations, strict=True)
        )

    def _combinations(self) -> list[tuple[tuple[str, Any], ...]]:
        import itertools

        return list(itertools.product(*(axis.values for axis in self.axes)))

    def _labels(self, combinations: list[tuple[tuple[str, Any], ...]]) -> list[str]:
        """`lr-1e-3.kl_loss_coef-0.1`: each key's last part and the value's text, in the grid's order."""
        return [
            ".".join(
                f"{axis.key.rsplit('.', 1)[-1]}-{_label_text(text)}"
                for axis, (text, _) in zip(self.axes, combo, strict=True)
            )
            for combo in combinations
        ]


def sweep_name(terminal: str, version: str, grid: Grid) -> str:
    """The sweep's name: the terminal step's name and version, and the grid's digest, e.g.
    `smoke/rl@2026.12.07~sweep-1a2b3c4d` (the same for every variant, for each submission of one grid)."""
    return f"{terminal}@{version}{MARK}{grid.digest()}"


def _label_text(text: str) -> str:
    """`text` as a name holds it: letters, digits, `.`, `_` and `-` kept, anything else `_`."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]", "_", text)
