"""Cases for the rule tests: plans built from the plans the preflight accepts (tests/support/specs.py).

Each case changes the number or setting its rule is about; `verdict` runs it through the whole
preflight (`check_plan`) or, for what only a launch document states (its source digest, the role
plan inside the recipe), through `rules.check` on a `Subject`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlaunch import rules
from rlaunch.runtimes.defects import KnownDefect
from rlaunch.runtimes.registry import Capabilities, RuntimeProfile, get_profile
from rlaunch.skyrl import ModelFacts, SkyRLTopology, check_plan
from rlaunch.skyrl.preflight import subject_of
from rlaunch.skyrl.values.config_yaml import render_recipe
from tests.support.specs import (
    BASE_RECIPE,
    plan,
    recipe,
    seed_topology,
    topology,
)

FSDP = get_profile("fsdp")
# The fsdp runtime with one open upstream defect that a tail-stride geometry triggers.
OPEN_DEFECT = dataclasses.replace(
    FSDP,
    name="fsdp-open-defect",
    known_defects=(KnownDefect("TEST#1", "skyrl", "tail batches crash", trigger="tail_stride"),),
)
# A runtime that runs only disaggregated roles.
DISAGGREGATED_ONLY = dataclasses.replace(
    FSDP, name="fsdp-disaggregated-only", capabilities=Capabilities(accelerator="gpu", colocated=False)
)
# A GPU runtime that caps inference TP and PP at 2.
NARROW = dataclasses.replace(
    FSDP,
    name="fsdp-narrow",
    capabilities=Capabilities(accelerator="gpu", max_inference_tensor_parallel=2, max_inference_pipeline_parallel=2),
)


def fully_async(workers: int = 64, **trainer: Any) -> dict[str, Any]:
    """The fully-async recipe SkyRL accepts with the seed plan at train = mini = 64 (staleness 4)."""
    return recipe(
        entrypoint="fully_async",
        trainer={
            "algorithm": {"policy_loss_type": "rollout_is"},
            "fully_async": {"num_parallel_generation_workers": workers, "max_staleness_steps": 4},
            **trainer,
        },
    )


def megatron(**config: Any) -> dict[str, Any]:
    return recipe(trainer={"policy": {"megatron_config": config}})


@dataclasses.dataclass(frozen=True)
class Case:
    topo: SkyRLTopology
    tree: dict[str, Any] = dataclasses.field(default_factory=lambda: BASE_RECIPE)
    profile: str | RuntimeProfile = "fsdp"
    seed: int | None = 17
    model: ModelFacts | None = None


def verdict(case: Case) -> list[rules.Violation]:
    """The preflight's verdict on `case`, as the rules' own violations."""
    return [
        rules.Violation(e.code, e.fields, e.message, e.fix, e.values)
        for e in check_plan(case.topo, case.tree, case.profile, seed=case.seed, model=case.model)
    ]


def subject(case: Case, **changes: Any) -> rules.Subject:
    """The `Subject` the preflight builds for `case`, with `changes` (what only a document states)."""
    prof = case.profile if isinstance(case.profile, RuntimeProfile) else get_profile(case.profile)
    made = subject_of(case.topo, case.tree, prof, case.seed, None)
    return dataclasses.replace(made, **changes)


def rendered(case: Case) -> dict[str, Any]:
    prof = case.profile if isinstance(case.profile, RuntimeProfile) else get_profile(case.profile)
    return render_recipe(case.tree, case.topo.role_plan, prof, case.seed or 0)


SEED = Case(seed_topology())


def seed(tree: dict[str, Any] | None = None, profile: str | RuntimeProfile = "fsdp", **plan_values: Any) -> Case:
    return Case(seed_topology(**plan_values), BASE_RECIPE if tree is None else tree, profile)


def colocated(**plan_values: Any) -> Case:
    return Case(topology(plan(**plan_values)))
