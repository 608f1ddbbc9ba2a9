"""The runs of one sweep read together: which sweep a run record says it belongs to, and `rlaunch
runs`' rows gathered under their sweep.

A sweep (`--sweep dotted.key=v1,v2,v3`) is one submission whose variants are each an RL run of its
own; every variant's run record carries, at its top level, `"sweep": {"name": ..., "variant": ...,
"settings": {dotted key: value}}`, the name the same for every variant of one sweep. Only that field
says a run is a sweep's: a step name is never parsed for it. A field that is not of that shape is
told, with the run it is in, and the run is shown as a run of no sweep: a view never stops on it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlaunch.runs.sweep import RECORD_KEY, SweepMembership


def settings_text(settings: Mapping[str, Any]) -> str:
    """`trainer.policy.optimizer_config.lr=1e-06, trainer.seed=3` (`-` when a variant sets none)."""
    return ", ".join(f"{key}={scalar_text(value)}" for key, value in settings.items()) or "-"


def scalar_text(value: Any) -> str:
    """A setting's value as `--set` would take it back (YAML: `true`, `null`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


class MalformedSweepError(ValueError):
    """A run record's `sweep` field that is not a sweep membership."""


def sweep_of(record: Mapping[str, Any] | None, source: str) -> SweepMembership | None:
    """The sweep the run record read from `source` belongs to; None when it has no `sweep` field.

    MalformedSweepError, naming the record, the field's problem and the fix, when the field is there
    but is not a membership (`rlaunch.runs.sweep.SweepMembership.from_dict` says what is wrong)."""
    value = (record or {}).get(RECORD_KEY)
    if value is None:
        return None
    try:
        return SweepMembership.from_dict(value)
    except ValueError as exc:
        raise MalformedSweepError(
            f"{source}: {exc}; it is written by the sweep's launch: relaunch the variant, or remove the field "
            "to list the run alone"
        ) from None


@dataclass(frozen=True)
class SweepGroup:
    """The rows of `rlaunch runs` that belong to sweep `name`, by variant label."""

    name: str
    rows: tuple[dict[str, Any], ...]

    def states_text(self) -> str:
        """`3 variants: 2 succeeded, 1 failed` (the most frequent state first)."""
        counts = Counter(str(row["state"]) for row in self.rows)
        states = ", ".join(f"{n} {state}" for state, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))
        return f"{len(self.rows)} variant{'s' if len(self.rows) != 1 else ''}: {states}"


def grouped(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any] | SweepGroup]:
    """`rows` (newest first, each with its `sweep` membership as a dict or None), a sweep's rows
    gathered into one group where its newest variant stands, its variants in label order."""
    members: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        if row.get("sweep"):
            members.setdefault(row["sweep"]["name"], []).append(row)
    shown: list[dict[str, Any] | SweepGroup] = []
    for row in rows:
        if not row.get("sweep"):
            shown.append(row)
        elif (name := row["sweep"]["name"]) in members:
            variants = sorted(members.pop(name), key=lambda r: (r["sweep"]["variant"], r["output_path"]))
            shown.append(SweepGroup(name, tuple(variants)))
    return shown
