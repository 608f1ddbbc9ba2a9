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


@dataclass(frozen=True)
class SweepMembership:
    """`name`: the same for every variant of one sweep (the terminal step's name and version and a
    digest of the grid); `variant`: the label its step names end in; `settings`: dotted recipe key
    -> the value this variant sets (a YAML scalar), in the order the grid declares the keys."""

    name: str
    variant: str
    settings: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_name(self.name, field="sweep.name", max_length=MAX_LABEL)
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
