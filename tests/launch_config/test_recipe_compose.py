"""Composing a recipe onto a small base config of its own: what is merged, what is refused (with
the problem a user reads: code, path, value, message, fix), open mappings and optional sections."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rlaunch.launch_config.composition import BaseConfigShape, RecipeProblem, compose, type_problem

BASE: dict[str, Any] = {
    "trainer": {
        "seed": 42,
        "lr": 1.0,
        "flag": False,
        "name": "run",
        "stages": ["a"],
        "anything": None,
        "pair": (1, 2),
        "policy": {"model": {"path": "/m"}},
        "kwargs": {"keep": 1, "nested": {"x": 1}},
        "ref": None,
    },
    "generator": {"engine": {"tp": 1}},
}
SHAPE = BaseConfigShape(
    open_mappings=frozenset({"trainer.kwargs", "trainer.free"}),
    optional_sections={"trainer.ref": {"model": {"path": None}, "size": 1}},
)


def problems_of(recipe: dict[str, Any], shape: BaseConfigShape | None = SHAPE) -> list[RecipeProblem]:
    return compose(BASE, recipe, shape)[1]


def test_compose_overlays_a_deep_copy_and_never_shares_the_recipe() -> None:
    before = copy.deepcopy(BASE)
    stages = ["b", ["c"]]
    recipe = {"trainer": {"seed": 3, "lr": 2, "stages": stages, "policy": {"model": {"path": "/p"}}}}
    composed, problems = compose(BASE, recipe)
    assert problems == []
    assert composed["trainer"]["seed"] == 3 and composed["trainer"]["lr"] == 2
    assert composed["trainer"]["policy"] == {"model": {"path": "/p"}} and composed["generator"] == BASE["generator"]
    assert BASE == before
    stages[1].append("d")
    composed["generator"]["engine"]["tp"] = 8
    assert composed["trainer"]["stages"] == ["b", ["c"]] and BASE["generator"]["engine"]["tp"] == 1


def test_an_open_mapping_merges_any_keys_and_takes_null() -> None:
    inner = {"y": [[1]]}
    composed, problems = compose(BASE, {"trainer": {"kwargs": {"new": 2, "nested": inner}}}, SHAPE)
    assert problems == []
    assert composed["trainer"]["kwargs"] == {"keep": 1, "new": 2, "nested": {"x": 1, "y": [[1]]}}
    inner["y"][0].append(2)
    assert composed["trainer"]["kwargs"]["nested"]["y"] == [[1]]
    replaced, _ = compose(BASE, {"trainer": {"kwargs": {"nested": 5}}}, SHAPE)
    assert replaced["trainer"]["kwargs"]["nested"] == 5
    emptied, problems = compose(BASE, {"trainer": {"kwargs": None}}, SHAPE)
    assert problems == [] and emptied["trainer"]["kwargs"] is None
    base = copy.deepcopy(BASE)
    base["trainer"]["kwargs"] = None
    given = {"a": {"b": 1}}
    filled, problems = compose(base, {"trainer": {"kwargs": given, "seed": 3}}, SHAPE)
    assert problems == [] and filled["trainer"]["kwargs"] == {"a": {"b": 1}}
    assert filled["trainer"]["seed"] == 3  # the keys after an open mapping are composed too
    given["a"]["b"] = 2
    assert filled["trainer"]["kwargs"] == {"a": {"b": 1}}


def test_an_open_mapping_refuses_a_scalar_and_is_strict_without_the_shape() -> None:
    (problem,) = problems_of({"trainer": {"kwargs": 3}})
    assert problem == RecipeProblem(
        "recipe.type_mismatch",
        "trainer.kwargs",
        3,
        "trainer.kwargs must be a mapping, got 3",
        "write trainer.kwargs as a mapping of keys",
    )
    (strict,) = problems_of({"trainer": {"kwargs": {"new": 2}}}, None)
    assert (strict.code, strict.path, strict.value) == ("recipe.unknown_key", "trainer.kwargs.new", 2)
    (absent,) = problems_of({"trainer": {"free": {"a": 1}}})  # open, but not a key of this base
    assert (absent.code, absent.path) == ("recipe.unknown_key", "trainer.free")


def test_an_optional_section_given_as_a_mapping_takes_its_recorded_keys() -> None:
    composed, problems = compose(BASE, {"trainer": {"ref": {"model": {"path": "/r"}}}}, SHAPE)
    assert problems == []
    assert composed["trainer"]["ref"] == {"model": {"path": "/r"}, "size": 1}
    again, _ = compose(BASE, {"trainer": {"ref": {"size": 2}, "seed": 3}}, SHAPE)
    assert again["trainer"]["ref"] == {"model": {"path": None}, "size": 2}
    assert again["trainer"]["seed"] == 3  # the keys after an optional section are composed too
    assert SHAPE.optional_sections["trainer.ref"] == {"model": {"path": None}, "size": 1}
    (problem,) = problems_of({"trainer": {"ref": {"sise": 2}}})
    assert (problem.code, problem.path, problem.fix) == (
        "recipe.unknown_key",
        "trainer.ref.sise",
        "did you mean trainer.ref.size?",
    )
    (wrong,) = problems_of({"trainer": {"ref": {"size": "2"}}})
    assert (wrong.code, wrong.path) == ("recipe.type_mismatch", "trainer.ref.size")
    kept, problems = compose(BASE, {"trainer": {"ref": None}}, SHAPE)
    assert problems == [] and kept["trainer"]["ref"] is None
    without_shape, problems = compose(BASE, {"trainer": {"ref": {"size": 2}}})
    assert problems == [] and without_shape["trainer"]["ref"] == {"size": 2}  # a None default takes anything


def test_an_optional_section_already_a_mapping_merges_strictly() -> None:
    base = copy.deepcopy(BASE)
    base["trainer"]["ref"] = {"size": 1}
    composed, problems = compose(base, {"trainer": {"ref": {"size": 2}}}, SHAPE)
    assert problems == [] and composed["trainer"]["ref"] == {"size": 2}
    (problem,) = compose(base, {"trainer": {"ref": {"model": {}}}}, SHAPE)[1]
    assert (problem.code, problem.path) == ("recipe.unknown_key", "trainer.ref.model")


def test_an_unknown_key_names_its_path_and_the_closest_known_key() -> None:
    (problem,) = problems_of({"trainer": {"seeed": 1}})
    assert problem == RecipeProblem(
        "recipe.unknown_key",
        "trainer.seeed",
        1,
        "trainer.seeed is not a key of the runtime's base config",
        "did you mean trainer.seed?",
    )
    (top,) = problems_of({"trainerr": {}})
    assert top.fix == "did you mean trainer?" and top.message == "trainerr is not a key of the runtime's base config"


def test_an_unknown_key_without_a_close_one_lists_the_known_keys() -> None:
    (problem,) = problems_of({"generator": {"engine": {"zzz": 1}}})
    assert problem.fix == "remove generator.engine.zzz; keys known at this level: tp"
    base = {f"key{i:02d}": i for i in range(13)}
    (many,) = compose(base, {"qqqqqq": 1})[1]
    assert (
        many.fix == "remove qqqqqq; keys known at this level: " + ", ".join(f"key{i:02d}" for i in range(12)) + ", ..."
    )
    (twelve,) = compose({f"key{i:02d}": i for i in range(12)}, {"qqqqqq": 1})[1]
    assert twelve.fix.endswith("key10, key11")


def test_a_section_must_stay_a_mapping() -> None:
    (problem,) = problems_of({"trainer": {"policy": "big"}})
    assert (problem.code, problem.path, problem.value) == ("recipe.type_mismatch", "trainer.policy", "big")
    assert problem.message == "trainer.policy must be a mapping, got 'big'"
    composed, problems = compose(BASE, {"trainer": {"policy": "big", "seed": 1}})
    assert len(problems) == 1 and composed["trainer"]["policy"] == {"model": {"path": "/m"}}
    assert composed["trainer"]["seed"] == 1  # a problem does not stop the rest of the recipe


def test_every_problem_is_reported_and_a_refused_value_is_not_kept() -> None:
    composed, problems = compose(BASE, {"trainer": {"seed": "1", "lr": "x", "flag": 1, "name": 2, "stages": "a"}})
    assert [(p.path, p.fix) for p in problems] == [
        ("trainer.seed", "write trainer.seed as an integer"),
        ("trainer.lr", "write trainer.lr as a number"),
        ("trainer.flag", "write trainer.flag as true or false"),
        ("trainer.name", "write trainer.name as a string"),
        ("trainer.stages", "write trainer.stages as a list"),
    ]
    assert composed["trainer"] == BASE["trainer"]


@pytest.mark.parametrize(
    ("default", "accepted", "refused", "expected"),
    [
        (True, [False, True], [0, 1, "true", None], "true or false"),
        (3, [0, -1, 2**70], [True, 3.0, "3", None], "an integer"),
        (1.5, [1, 0.25, -2], [True, "1.5", None], "a number"),
        ("s", ["", "x"], [1, None, b"s"], "a string"),
        (["a"], [[], [1]], [("a",), "a", None], "a list"),
        (None, [1, "x", None, {}], [], ""),
        ((1, 2), [[1], "x", 3], [], ""),
    ],
)
def test_a_value_needs_the_type_of_its_base_default(
    default: Any, accepted: list[Any], refused: list[Any], expected: str
) -> None:
    for value in accepted:
        assert type_problem("a.b", default, value) is None, value
    for value in refused:
        problem = type_problem("a.b", default, value)
        assert problem == RecipeProblem(
            "recipe.type_mismatch", "a.b", value, f"a.b={value!r} must be {expected}", f"write a.b as {expected}"
        )


def test_a_shape_reads_its_raw_description() -> None:
    assert BaseConfigShape.of(None) == BaseConfigShape() == BaseConfigShape.of({})
    assert BaseConfigShape.of({"open_mappings": None, "optional_sections": None}) == BaseConfigShape()
    shape = BaseConfigShape.of({"open_mappings": ["a.b", "c"], "optional_sections": {"d": {"e": 1}}})
    assert shape.open_mappings == frozenset({"a.b", "c"}) and shape.optional_sections == {"d": {"e": 1}}
    assert shape.stops == frozenset({"a.b", "c", "d"})
    assert BaseConfigShape().stops == frozenset()
