"""What a run would do with each step, decided from storage reads only.

An immutable step with a succeeded record is served and its dependencies are not needed for it;
a mutable step always rebuilds; anything else runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from rlaunch.artifacts import records
from rlaunch.artifacts.step import ArtifactStep, check_immutability, graph_handles

Action = Literal["run", "serve", "rebuild", "unneeded"]


@dataclass(frozen=True)
class PlannedStep:
    step: ArtifactStep[Any]
    action: Action
    path: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.step.name,
            "version": self.step.version,
            "identity": self.step.identity,
            "fingerprint": self.step.fingerprint,
            "type": self.step.artifact_type.type_name(),
            "mutable": self.step.mutable,
            "action": self.action,
            "path": self.path,
            "deps": [d.identity for d in self.step.deps],
        }


def plan_graph(roots: Iterable[ArtifactStep[Any]], prefix: str) -> list[PlannedStep]:
    """Plan every reachable step (deps first); validates the graph and every fingerprint."""
    roots = list(roots)
    steps = graph_handles(roots)
    check_immutability(steps)
    for step in steps:
        _ = step.fingerprint  # raises on canonicalisation problems and expected_fingerprint pins
    action: dict[str, Action] = {}
    needed: set[str] = set()

    pending = list(reversed(roots))
    while pending:
        step = pending.pop()
        if step.identity in needed:
            continue
        needed.add(step.identity)
        if step.mutable:
            action[step.identity] = "rebuild"
        elif records.is_succeeded(step.path(prefix)):
            action[step.identity] = "serve"  # its dependencies are not needed for it
            continue
        else:
            action[step.identity] = "run"
        pending.extend(reversed(step.deps))

    return [PlannedStep(s, action.get(s.identity, "unneeded"), s.path(prefix)) for s in steps]
