"""Data rows carry the fields the runtime reads: checked against the facts data artifacts recorded.

A data artifact records, per split (a data file), its row count, its field names and the first
row that lacks a field (`rlaunch.sources.data_facts`). The runtime profile names the fields every
row must carry (`data_fields`: SkyRL's dataset format for the SkyRL runtimes, trl-cpu's own for
trl-cpu). A split whose rows lack one is refused before anything is allocated, naming the split,
the field and a row that lacks it. Data not built yet, or built without recorded facts, is not
judged here; the RL step checks it again once its inputs are built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlaunch.rules.subject import Subject, Violation, violation


@dataclass(frozen=True)
class DataFacts:
    """One data source as the rules see it: `splits` maps a split (file) to its recorded facts
    (`rows`, `fields`, `first_missing`: field -> the first row index without it)."""

    role: str  # "train_data[0]", "validation_data[1]"
    identity: str
    relative_path: str = ""
    splits: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def selected(self) -> dict[str, Mapping[str, Any]]:
        """The splits this source hands the trainer: its relative path (a file or a directory), or all."""
        path = self.relative_path.strip("/")
        if not path:
            return dict(self.splits)
        return {k: v for k, v in self.splits.items() if k == path or k.startswith(path + "/")}


def first_row_without(split: Mapping[str, Any], name: str) -> int | None:
    """The index of a row that lacks `name` (None: every row has it, or the split is empty)."""
    if not split.get("rows"):
        return None
    if name not in (split.get("fields") or ()):
        return 0
    index = (split.get("first_missing") or {}).get(name)
    return index if isinstance(index, int) else None


def data_rules(s: Subject) -> list[Violation]:
    out = []
    needed = s.profile.data_fields
    for source in s.data:
        for split, facts in sorted(source.selected().items()):
            for name in needed:
                row = first_row_without(facts, name)
                if row is None:
                    continue
                out.append(
                    violation(
                        "data.missing_field",
                        [f"{source.role}.relative_path"],
                        f"{source.role} {source.identity} split {split!r}: row {row} has no field {name!r}, which "
                        f"runtime {s.profile.name} reads from every row (data_fields: {', '.join(needed)}; the split "
                        f"has {facts.get('rows')} row(s) with fields {list(facts.get('fields') or ())})",
                        f"rebuild the data artifact with {name!r} in every row (a new data version), or point "
                        f"{source.role} at a split that has it",
                        split=split,
                        field=name,
                        row=row,
                    )
                )
    return out
