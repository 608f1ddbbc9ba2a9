"""Planning an RL step: its stored facts (read once), the preflight, the document it would launch.

Building a spec or a `skyrl_step` reads nothing (a spec is a pure value). When the graph is planned
(the dry run, `--run` before it submits, the coordinator's replay) each RL step is planned once per
prefix: its stored facts are gathered (`stored_facts`), the preflight judges the plan against them
and its execution (`preflight`: every violation of every RL step at once, before anything is
planned or submitted), and the launch document it would hand the host is rendered with them
(`planned_document`: live paths, placement and input identities; only the attempt id is a stand-in).
The plan's views read that document and the facts, never the spec. The RL step judges again once
its inputs are built, with facts gathered then; the launch host judges the document it is given.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from rlaunch.artifacts import StepContext
from rlaunch.launch_config.schema import SkyRLLaunchConfig, from_dict
from rlaunch.rules import wandb_entity
from rlaunch.skyrl.execution import SkyRLExecution
from rlaunch.skyrl.launch_document import gates_section, live_run_paths, render_document
from rlaunch.skyrl.preflight import check_plan
from rlaunch.skyrl.preflight_error import PreflightError
from rlaunch.skyrl.spec import SkyRLSpec
from rlaunch.skyrl.stored_facts import StoredFacts, gather

if TYPE_CHECKING:
    from rlaunch.skyrl.rl_step import SkyRLArtifactStep  # it plans through this module

PLANNED_ATTEMPT = "planned"  # the attempt id of a planned document (a launch draws a fresh one)


def stored_facts(spec: SkyRLSpec, prefix: str, smoke: SkyRLSpec | None = None) -> StoredFacts:
    """What storage under `prefix` holds for `spec`'s run (and for its declared `smoke`'s), read now."""
    data = [(f"train_data[{i}]", s) for i, s in enumerate(spec.train_data)]
    data += [(f"validation_data[{i}]", s) for i, s in enumerate(spec.validation_data)]
    smoke_output = None if smoke is None else live_run_paths(smoke, prefix).output_path
    return gather(spec.model, data, prefix, live_run_paths(spec, prefix), smoke_output)


def violations(spec: SkyRLSpec, execution: SkyRLExecution, facts: StoredFacts) -> list[PreflightError]:
    """Every violation of one RL step: its plan and recipe against its runtime and the stored facts
    of its model and data, and (once the recipe renders) its W&B entity against the execution's."""
    found = check_plan(
        spec.topology,
        spec.recipe,
        spec.runtime.runtime_profile,
        seed=spec.seed,
        model=facts.model.facts,
        data=list(facts.data),
    )
    try:
        composed = spec.composed_recipe
    except ValueError:
        return found  # the recipe does not render: check_plan has said why
    owner = f"{type(execution).__name__}(wandb_entity=...)"
    return found + [PreflightError.from_violation(v) for v in wandb_entity(composed, execution.wandb_entity, owner)]


def check(spec: SkyRLSpec, execution: SkyRLExecution, facts: StoredFacts) -> None:
    """`violations` raised as one PreflightError (the RL step, once its inputs are built)."""
    found = violations(spec, execution, facts)
    if found:
        raise PreflightError.combine(found)


def preflight(steps: Iterable[SkyRLArtifactStep], prefix: str) -> None:
    """Raise one PreflightError listing every violation of every RL step (`skyrl_step` handles)."""
    found = [v for step in steps for v in violations(step.spec, step.execution, step.stored_facts(prefix))]
    if found:
        raise PreflightError.combine(found)


def planned_document(step: SkyRLArtifactStep, prefix: str, facts: StoredFacts) -> SkyRLLaunchConfig:
    """The launch document `step` would hand the host if `--run` launched it now under `prefix`."""
    return from_dict(
        render_document(
            step.spec,
            step.execution,
            StepContext.for_run(step, prefix),
            attempt_id=PLANNED_ATTEMPT,
            export_hf=step.export_hf,
            gates=gates_section(step.smoke, step.execution, prefix, is_smoke=step.is_smoke),
            model=facts.model,
        )
    )
