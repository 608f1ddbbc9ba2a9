"""Planning an RL step: its stored facts (read once), the launch it would hand the host, the preflight.

Building a spec or a `skyrl_step` reads nothing (a spec is a pure value). When the graph is planned
(the dry run, `--run` before it submits, the coordinator's replay) `plan` plans each RL step, and
each smoke one declares, once per prefix into one value, `Planning`: its stored facts are gathered
(`stored_facts`), the launch document it would hand the host is rendered with them
(`planned_document`: live paths, placement and input identities; only the attempt id is a
stand-in) and kept as a `PlannedLaunch` (its recipe composed once, its geometry, its memory table),
and the preflight judges each step against its facts, its execution and that composition (every
violation of every RL step at once, before anything is submitted). The plan's views, the gates and
the submission checks read that value, never the spec; nothing keeps a copy. The RL step judges
again once its inputs are built, with facts gathered then; the launch host judges the document it
is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from rlaunch.artifacts import StepContext
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.schema import SkyRLLaunchConfig, from_dict
from rlaunch.rules import wandb_entity
from rlaunch.skyrl.plan.launch_document import gates_section, live_run_paths, render_document
from rlaunch.skyrl.plan.stored_facts import StoredFacts, gather
from rlaunch.skyrl.preflight import check_plan
from rlaunch.skyrl.values.execution import SkyRLExecution
from rlaunch.skyrl.values.preflight_error import PreflightError
from rlaunch.skyrl.values.spec import SkyRLSpec

if TYPE_CHECKING:
    from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep  # it plans through this module

PLANNED_ATTEMPT = "planned"  # the attempt id of a planned document (a launch draws a fresh one)


@dataclass(frozen=True)
class PlannedRun:
    """One RL step planned under a prefix: what storage held for it, and what it would launch
    (None: its recipe does not render, which the preflight reports)."""

    facts: StoredFacts
    launch: PlannedLaunch | None


@dataclass(frozen=True)
class Planning:
    """Every RL step of a graph (and every smoke they declare) planned once under `prefix`."""

    prefix: str
    runs: Mapping[SkyRLArtifactStep, PlannedRun]

    def facts(self, step: SkyRLArtifactStep) -> StoredFacts:
        return self.runs[step].facts

    def launch(self, step: SkyRLArtifactStep) -> PlannedLaunch:
        """What `step` would launch (its recipe renders: the preflight let the plan through)."""
        launch = self.runs[step].launch
        assert launch is not None, f"{step.identity}: planned without a preflight"
        return launch

    def view_of(self, step: SkyRLArtifactStep) -> tuple[PlannedLaunch, StoredFacts, PlannedLaunch | None]:
        """What the plan's views read for `step` (`views.plan_view.describe_step`, beside the declared
        smoke's stored run: `cli.plan_text.step_lines`): its planned launch, its stored facts and its
        declared smoke's planned launch."""
        return self.launch(step), self.facts(step), None if step.smoke is None else self.launch(step.smoke)

    def numbers(self, step: SkyRLArtifactStep) -> dict[str, Any]:
        """The plan's numbers for `step` as data (`--plan-format json`): the memory table, the
        nearest plans that fit when it does not (`rlaunch.rules.fit`), and the recipe overrides."""
        from rlaunch.rules.document_subject import nearest_fits
        from rlaunch.rules.fit import needs_search

        launch = self.launch(step)
        found = (
            nearest_fits(launch.document, launch.profile, dict(launch.composed)) if needs_search(launch.memory) else []
        )
        return {
            "memory": launch.memory.as_dict(),
            "what_would_fit": [f.as_dict() for f in found],
            "recipe_overrides": dict(launch.document.run.recipe_overrides),
        }


def stored_facts(spec: SkyRLSpec, prefix: str, smoke: SkyRLSpec | None = None) -> StoredFacts:
    """What storage under `prefix` holds for `spec`'s run (and for its declared `smoke`'s), read now."""
    data = [(f"train_data[{i}]", s) for i, s in enumerate(spec.train_data)]
    data += [(f"validation_data[{i}]", s) for i, s in enumerate(spec.validation_data)]
    smoke_output = None if smoke is None else live_run_paths(smoke, prefix).output_path
    return gather(spec.model, data, prefix, live_run_paths(spec, prefix), smoke_output)


def violations(
    spec: SkyRLSpec, execution: SkyRLExecution, facts: StoredFacts, launch: PlannedLaunch | None = None
) -> list[PreflightError]:
    """Every violation of one RL step: its plan and recipe against its runtime and the stored facts
    of its model and data, and (once the recipe renders) its W&B entity against the execution's.
    `launch`: what the step would launch, whose composition the rules read (else composed here)."""
    composition = None if launch is None else (launch.composed, launch.problems, launch.geometry)
    found = check_plan(
        spec.topology,
        spec.recipe,
        spec.runtime.runtime_profile,
        seed=spec.seed,
        model=facts.model.facts,
        data=list(facts.data),
        composition=composition,
    )
    if launch is not None:
        composed = launch.composed
    else:
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


def plan(steps: Iterable[SkyRLArtifactStep], prefix: str) -> Planning:
    """Plan each RL step and each smoke one declares once under `prefix`, then the preflight of the
    steps: one PreflightError listing every violation of every step."""
    steps = list(dict.fromkeys(steps))
    smokes = [s.smoke for s in steps if s.smoke is not None and s.smoke not in steps]
    runs = {step: planned_run(step, prefix) for step in dict.fromkeys([*steps, *smokes])}
    found = [v for step in steps for v in violations(step.spec, step.execution, runs[step].facts, runs[step].launch)]
    # A declared smoke is a gate, not a step of this graph (its own plan preflights it): it is
    # refused here only when there is nothing to compare with, its recipe does not render.
    found += [v for s in smokes if runs[s].launch is None for v in violations(s.spec, s.execution, runs[s].facts)]
    if found:
        raise PreflightError.combine(found)
    return Planning(prefix, MappingProxyType(runs))


def planned_run(step: SkyRLArtifactStep, prefix: str) -> PlannedRun:
    """Gather `step`'s stored facts and plan what it would launch, once."""
    facts = stored_facts(step.spec, prefix, None if step.smoke is None else step.smoke.spec)
    try:
        step.spec.rendered_recipe()
    except ValueError:
        return PlannedRun(facts, None)  # the recipe does not render: the preflight says why
    return PlannedRun(facts, PlannedLaunch.of(planned_document(step, prefix, facts)))


def planned_document(step: SkyRLArtifactStep, prefix: str, facts: StoredFacts) -> SkyRLLaunchConfig:
    """The launch document `step` would hand the host if `--run` launched it now under `prefix`."""
    return from_dict(
        render_document(
            step.spec,
            step.execution,
            StepContext.for_run(step, prefix),
            attempt_id=PLANNED_ATTEMPT,
            export_hf=step.export_hf,
            gates=gates_section(step.smoke, step.execution, prefix, is_smoke=step.is_smoke, waivers=step.waivers),
            model=facts.model,
        )
    )
