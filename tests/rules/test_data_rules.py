"""Data rows carry the fields the runtime reads (`rlaunch.rules.data_rules`), at each edge: an
empty split, a field absent from every row, the first row without it, a recorded index that is no
index; a source's relative path selecting its split (the whole name, a directory, not a sibling
whose name merely starts the same); the violation's field, message, fix and values."""

from __future__ import annotations

import dataclasses

import pytest

from rlaunch.rules.data_rules import DataFacts, data_rules, first_row_without
from tests.rules.helpers import SEED, subject

FULL = {"rows": 10, "fields": ["prompt", "reward_spec"], "first_missing": {}}


@pytest.mark.parametrize(
    ("split", "expected"),
    [
        (FULL, None),
        ({**FULL, "rows": 0}, None),  # an empty split lacks nothing
        ({"fields": []}, None),  # rows not recorded: nothing to judge
        ({"rows": 3, "fields": ["prompt"]}, 0),  # no row has it: the first row lacks it
        ({"rows": 3}, 0),  # no fields recorded at all
        ({"rows": 3, "fields": None}, 0),
        ({**FULL, "first_missing": {"reward_spec": 7}}, 7),
        ({**FULL, "first_missing": {"reward_spec": 0}}, 0),  # row 0 is a row, not "none"
        ({**FULL, "first_missing": {"prompt": 2}}, None),  # another field's gap
        ({**FULL, "first_missing": {"reward_spec": "7"}}, None),  # not an index
        ({**FULL, "first_missing": None}, None),
    ],
)
def test_the_first_row_without_a_field(split: dict, expected: int | None) -> None:
    assert first_row_without(split, "reward_spec") == expected


SPLITS = {"train.jsonl": FULL, "eval/a.jsonl": FULL, "eval/b.jsonl": FULL, "evaluation.jsonl": FULL, "X/y.jsonl": FULL}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("", set(SPLITS)),
        ("/", set(SPLITS)),
        ("train.jsonl", {"train.jsonl"}),
        ("/train.jsonl/", {"train.jsonl"}),
        ("eval", {"eval/a.jsonl", "eval/b.jsonl"}),  # a directory, not evaluation.jsonl
        ("eval/a.jsonl", {"eval/a.jsonl"}),
        ("train", set()),  # a prefix of a file's name selects nothing
        ("eval/a", set()),
        ("X", {"X/y.jsonl"}),  # only slashes are stripped
    ],
)
def test_a_relative_path_selects_its_splits_whole(path: str, expected: set[str]) -> None:
    assert set(DataFacts("train_data[0]", "data/v1", path, SPLITS).selected()) == expected


def _violations(*sources: DataFacts) -> list:
    return data_rules(dataclasses.replace(subject(SEED), data=sources))


def test_a_split_without_a_field_is_refused_naming_split_field_and_row() -> None:
    lacking = {"rows": 4, "fields": ["prompt", "reward_spec", "extra"], "first_missing": {"reward_spec": 3}}
    (v,) = _violations(DataFacts("validation_data[1]", "data/v2", "", {"b.jsonl": lacking, "a.jsonl": FULL}))
    assert v.code == "data.missing_field"
    assert v.fields == ("validation_data[1].relative_path",)
    assert dict(v.values) == {"split": "b.jsonl", "field": "reward_spec", "row": 3}
    assert v.message == (
        "validation_data[1] data/v2 split 'b.jsonl': row 3 has no field 'reward_spec', which runtime fsdp reads "
        "from every row (data_fields: prompt, reward_spec; the split has 4 row(s) with fields "
        "['prompt', 'reward_spec', 'extra'])"
    )
    assert v.fix == (
        "rebuild the data artifact with 'reward_spec' in every row (a new data version), or point "
        "validation_data[1] at a split that has it"
    )


def test_every_missing_field_of_every_selected_split_is_named_in_order() -> None:
    bare = {"rows": 2, "fields": []}
    found = _violations(
        DataFacts("train_data[0]", "d/1", "", {"z.jsonl": bare, "a.jsonl": bare}),
        DataFacts("train_data[1]", "d/2", "keep.jsonl", {"keep.jsonl": FULL, "skip.jsonl": bare}),
    )
    assert [(v.values["split"], v.values["field"], v.values["row"]) for v in found] == [
        ("a.jsonl", "prompt", 0),
        ("a.jsonl", "reward_spec", 0),
        ("z.jsonl", "prompt", 0),
        ("z.jsonl", "reward_spec", 0),
    ]
    assert {v.fields for v in found} == {("train_data[0].relative_path",)}


def test_no_data_or_no_fields_needed_is_no_violation() -> None:
    assert _violations() == []
    bare = {"rows": 2, "fields": []}
    s = subject(SEED)
    no_fields = dataclasses.replace(s, profile=dataclasses.replace(s.profile, data_fields=()))
    assert data_rules(dataclasses.replace(no_fields, data=(DataFacts("train_data[0]", "d", "", {"a": bare}),))) == []
