"""The preflight of RL steps when the graph is planned: every violation of every step at once.

Building a spec or a `skyrl_step` reads nothing (a spec is a pure value). When the graph is planned
(the dry run, `--run` before it submits, the coordinator's replay) each RL step is judged here
against what storage holds under the prefix (its model's and data's recorded facts) and its
execution (the W&B entity the recipe needs), before anything is planned or submitted; the RL step
judges again once its inputs are built, and the launch host judges the document it is given.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rlaunch.rules import wandb_entity
from rlaunch.skyrl.preflight_error import PreflightError


def violations(step: Any, prefix: str) -> list[PreflightError]:
    """Every violation of one RL step (a `skyrl_step` handle) planned under `prefix`."""
    spec, execution = step.spec, step.execution
    found = spec.stored_violations(prefix)
    try:
        composed = spec.composed_recipe
    except ValueError:
        return found  # the recipe does not render: the preflight has said why
    owner = f"{type(execution).__name__}(wandb_entity=...)"
    return found + [PreflightError.from_violation(v) for v in wandb_entity(composed, execution.wandb_entity, owner)]


def preflight(steps: Iterable[Any], prefix: str) -> None:
    """Raise one PreflightError listing every violation of every RL step in `steps`."""
    found = [v for step in steps for v in violations(step, prefix)]
    if found:
        raise PreflightError.combine(found)
