"""What `check_plan` hands the rules besides the plan: the data facts the data artifacts recorded,
and a composition already derived (a `PlannedLaunch` composes once; the preflight must judge that
composition, not compose again)."""

from __future__ import annotations

from rlaunch.launch_config.composition import RecipeProblem
from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules.data_rules import DataFacts
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl import check_plan
from rlaunch.skyrl.preflight import subject_of
from rlaunch.skyrl.values.config_yaml import render_recipe
from tests.support.specs import BASE_RECIPE, codes, seed_topology

LACKING = DataFacts("train_data[0]", "data/gsm8k@v1", "", {"train.jsonl": {"rows": 3, "fields": ["prompt"]}})


def test_the_data_facts_reach_the_rules() -> None:
    topo = seed_topology()
    assert codes(check_plan(topo, BASE_RECIPE, "fsdp", seed=17)) == []
    (refused,) = check_plan(topo, BASE_RECIPE, "fsdp", seed=17, data=[LACKING])
    assert (refused.code, refused.values["field"], refused.values["row"]) == ("data.missing_field", "reward_spec", 0)
    assert subject_of(topo, BASE_RECIPE, get_profile("fsdp"), 17, None, [LACKING]).data == (LACKING,)


def test_a_composition_given_is_the_one_judged() -> None:
    topo, fsdp = seed_topology(), get_profile("fsdp")
    composed, problems = fsdp.compose(render_recipe(BASE_RECIPE, topo.role_plan, fsdp, 17))
    assert not problems
    geometry = Geometry.from_recipe(composed)
    assert check_plan(topo, BASE_RECIPE, fsdp, seed=17, composition=(composed, [], geometry)) == []
    problem = RecipeProblem("recipe.unknown_key", "trainer.nope", 1, "trainer.nope is not a key", "remove it")
    found = check_plan(topo, BASE_RECIPE, fsdp, seed=17, composition=(composed, [problem], geometry))
    assert [(e.code, e.message) for e in found] == [("recipe.unknown_key", "trainer.nope is not a key")]
