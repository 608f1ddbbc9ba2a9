"""The reference's and critic's recipe rules (`rlaunch.rules.roles.role_rules`) on composed recipes
written here, sparse ones included: a setting a recipe leaves out reads as SkyRL's default (a
critic sequence parallelism of 1, the language model loaded whole), never as an error."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules.roles import role_rules
from rlaunch.runtimes.registry import get_profile
from tests.rules.helpers import SEED, rendered


def geometry(use_reference: bool) -> Geometry:
    fsdp = get_profile("fsdp")
    return dataclasses.replace(Geometry.from_recipe(fsdp.compose(rendered(SEED))[0]), use_reference=use_reference)


def test_a_sparse_recipe_breaks_no_role_rule() -> None:
    assert role_rules(geometry(True), {}) == []
    assert role_rules(geometry(True), {"trainer": {"critic": {"sequence_parallel_size": 1}}}) == []


def test_a_critic_sequence_parallelism_of_zero_is_refused() -> None:
    (v,) = role_rules(geometry(False), {"trainer": {"critic": {"sequence_parallel_size": 0}}})
    assert (v.code, v.values) == ("recipe.critic_sequence_parallel", {"value": 0})


@pytest.mark.parametrize(
    ("use_reference", "followers", "lacking"),
    [
        (False, {}, ["generator.inference_engine.language_model_only"]),
        (True, {}, ["generator.inference_engine.language_model_only", "trainer.ref.language_model_only"]),
        (True, {"generator": {"inference_engine": {"language_model_only": True}}}, ["trainer.ref.language_model_only"]),
        (False, {"generator": {"inference_engine": {"language_model_only": True}}}, []),
    ],
)
def test_language_model_only_must_be_followed_by_the_engines_and_the_reference(
    use_reference: bool, followers: dict[str, Any], lacking: list[str]
) -> None:
    composed = {**followers, "trainer": {"policy": {"language_model_only": True}}}
    found = role_rules(geometry(use_reference), composed)
    assert [v.values["lacking"] for v in found] == ([lacking] if lacking else [])
