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
from rlaunch.errors import UserError

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


class SubmissionPathError(UserError, ValueError):
    """A runner met a step only another path may launch (an RL step: `@rl_build_options`)."""


def refuse_foreign_steps(planned: Iterable[PlannedStep], submitter: str | None) -> None:
    """Refuse, before anything is built, steps this runner would build that only `submitted_by`
    may launch (an RL step's checks and gates live in its coordinator). Served steps are read only."""
    foreign = [
        p.step for p in planned if p.action in ("run", "rebuild") and p.step.submitted_by not in (None, submitter)
    ]
    if foreign:
        names = ", ".join(f"{s.identity} (launched only by {s.submitted_by})" for s in foreign)
        raise SubmissionPathError(
            f"this runner cannot build {names}: decorate the experiment's main with "
            f"{foreign[0].submitted_by} instead, so the step goes through its coordinator, submission checks and gates"
        )
