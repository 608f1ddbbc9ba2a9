"""The strict decoder on small dataclasses of its own: each type's verdict at its edge (what it
accepts, the nearest thing it refuses) and the exact problem line a user reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, List, Literal  # noqa: UP035 - a bare List has no item type

import pytest

from rlaunch.launch_config.typed import DocumentError, decode, encode


@dataclass(frozen=True)
class Inner:
    size: int
    ratio: float = 0.5


@dataclass(frozen=True)
class Outer:
    name: str
    inner: Inner
    flag: bool = False
    tags: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    extra: Any = None
    note: str | None = None
    mode: Literal["a", "b"] = "a"
    level: Literal[1, 2] = 1
    plain: dict = field(default_factory=dict)
    items: List = field(default_factory=list)  # noqa: UP006

    def __post_init__(self) -> None:
        if self.name == "bad":
            raise ValueError("name must not be 'bad'")


@dataclass(frozen=True)
class Typed:
    size: int

    def __post_init__(self) -> None:
        if self.size < 0:
            raise TypeError(f"size={self.size} cannot be negative")


GOOD: dict[str, Any] = {"name": "x", "inner": {"size": 3}}


def problems(data: Any, tp: Any = Outer) -> list[str]:
    with pytest.raises(DocumentError) as info:
        decode(tp, data)
    assert isinstance(info.value, ValueError)
    return info.value.problems


def with_(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}


def test_a_valid_mapping_decodes_with_defaults_and_converted_types() -> None:
    value = decode(
        Outer,
        with_(
            inner={"size": 3, "ratio": 2},
            tags=["p", "q"],
            env={"K": "v"},
            extra={"k": [1.5]},
            note=None,
            mode="b",
            level=2,
            plain={"a": 1},
            items=[1, "x"],
        ),
    )
    assert value == Outer(
        "x", Inner(3, 2.0), False, ("p", "q"), {"K": "v"}, {"k": [1.5]}, None, "b", 2, {"a": 1}, (1, "x")
    )
    assert isinstance(value.inner.ratio, float) and isinstance(value.tags, tuple)
    assert decode(Outer, GOOD) == Outer("x", Inner(3))


def test_one_problem_is_one_line_and_several_are_listed() -> None:
    with pytest.raises(DocumentError) as one:
        decode(Outer, with_(name=1))
    assert str(one.value) == "launch document is invalid: name: expected str, got 1"
    with pytest.raises(DocumentError) as named:
        decode(Outer, with_(name=1), what="thing")
    assert str(named.value) == "thing is invalid: name: expected str, got 1"
    with pytest.raises(DocumentError) as several:
        decode(Outer, with_(name=1, flag=0))
    assert str(several.value) == (
        "launch document is invalid (2 problem(s)):\n  - name: expected str, got 1\n  - flag: expected bool, got 0"
    )
    assert several.value.problems == ["name: expected str, got 1", "flag: expected bool, got 0"]
    assert str(DocumentError(["x: bad"])) == "launch document is invalid: x: bad"


def test_a_key_that_is_not_a_string_does_not_hide_the_keys_after_it() -> None:
    assert problems(with_(env={1: "v", "K": 2, 3: "w"})) == [
        "env: key 1 must be a string",
        "env.K: expected str, got 2",
        "env: key 3 must be a string",
    ]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (with_(name=True), "name: expected str, got True"),
        (with_(flag=1), "flag: expected bool, got 1"),
        (with_(flag="true"), "flag: expected bool, got 'true'"),
        (with_(inner={"size": True}), "inner.size: expected an integer, got True"),
        (with_(inner={"size": 3.0}), "inner.size: expected an integer, got 3.0"),
        (with_(inner={"size": 3, "ratio": True}), "inner.ratio: expected a number, got True"),
        (with_(inner={"size": 3, "ratio": "1"}), "inner.ratio: expected a number, got '1'"),
        (
            with_(inner={"size": 3, "ratio": float("nan")}),
            "inner.ratio: nan is not a finite number; write a finite number",
        ),
        (
            with_(inner={"size": 3, "ratio": float("-inf")}),
            "inner.ratio: -inf is not a finite number; write a finite number",
        ),
        (with_(inner=[3]), "inner: expected a mapping for Inner, got [3]"),
        (with_(tags="p"), "tags: expected a list, got 'p'"),
        (with_(tags=["p", 2]), "tags[1]: expected str, got 2"),
        (with_(items="x"), "items: expected a list, got 'x'"),
        (with_(env=["K"]), "env: expected a mapping, got ['K']"),
        (with_(env={"K": 1}), "env.K: expected str, got 1"),
        (with_(env={1: "v"}), "env: key 1 must be a string"),
        (with_(plain=[1]), "plain: expected a mapping, got [1]"),
        (with_(note=3), "note: expected str or NoneType, got 3"),
        (with_(mode="c"), "mode: 'c' is not one of ['a', 'b']"),
        (with_(level=True), "level: True is not one of [1, 2]"),
        (with_(level=3), "level: 3 is not one of [1, 2]"),
        (with_(extra={"a": [1.0, float("inf")]}), "extra.a[1]: inf is not a finite number; write a finite number"),
        (with_(extra=float("nan")), "extra: nan is not a finite number; write a finite number"),
        (with_(name="bad"), "<root>: name must not be 'bad'"),
        (
            with_(colour="blue"),
            "colour: unknown key; Outer accepts ['env', 'extra', 'flag', 'inner', 'items', 'level', 'mode', 'name', 'note', 'plain', 'tags']",
        ),
        (with_(inner={"size": 3, "sise": 4}), "inner.sise: unknown key; Inner accepts ['ratio', 'size']"),
        ({"inner": {"size": 3}}, "name: required key is missing"),
        (with_(inner={}), "inner.size: required key is missing"),
        ("x", "<root>: expected a mapping for Outer, got 'x'"),
    ],
)
def test_each_type_refuses_its_nearest_wrong_value_naming_the_path(data: Any, expected: str) -> None:
    assert problems(data) == [expected]


def test_problems_inside_a_section_are_not_reported_again_by_its_constructor() -> None:
    assert problems(with_(name="bad", flag=1)) == ["flag: expected bool, got 1"]
    assert problems({"size": -1}, Typed) == ["<root>: size=-1 cannot be negative"]
    assert problems({"outer": {"size": -1}}, Mapping[str, Typed]) == ["outer: size=-1 cannot be negative"]


def test_free_form_values_keep_their_type_and_only_non_finite_numbers_are_refused() -> None:
    assert decode(Any, {"a": [1, 2.5, "x", None, True]}) == {"a": [1, 2.5, "x", None, True]}
    assert decode(dict, {"a": 1}) == {"a": 1} and decode(Mapping, {"a": 1}) == {"a": 1}
    assert decode(List, [1, "x"]) == (1, "x")  # noqa: UP006
    assert decode(float, 2) == 2.0 and type(decode(float, 2)) is float
    assert decode(int, 2**70) == 2**70
    assert decode(str | None, None) is None and decode(int | None, 4) == 4
    assert decode(int | str, "4") == "4"
    for data, path in ([float("nan")], "[0]"), (float("inf"), "<root>"), ({1: float("nan")}, "1"):
        assert problems(data, Any) == [
            f"{path}: {data if path == '<root>' else float('nan')!r} is not a finite number; write a finite number"
        ]


def test_a_list_path_starts_at_the_root() -> None:
    assert problems([1, "x"], tuple[int, ...]) == ["[1]: expected an integer, got 'x'"]
    assert problems({"a": "x"}, dict[str, int]) == ["a: expected an integer, got 'x'"]
    assert problems(1, str | None) == ["<root>: expected str or NoneType, got 1"]
    assert problems(True, Literal[1]) == ["<root>: True is not one of [1]"]


def test_an_optional_section_given_as_a_mapping_names_its_own_problems() -> None:
    assert decode(Inner | None, {"size": 3}) == Inner(3) and decode(Inner | None, None) is None
    assert problems({"section": {"size": "x"}}, Mapping[str, Inner | None]) == [
        "section.size: expected an integer, got 'x'"
    ]
    assert problems({"section": {"size": 3, "sise": 4}}, Mapping[str, Inner | None]) == [
        "section.sise: unknown key; Inner accepts ['ratio', 'size']"
    ]
    assert problems({"size": "x"}, Inner | None) == ["size: expected an integer, got 'x'"]
    # with another option beside the section, each is tried and the union is refused as a whole
    assert problems({"either": {"size": "x"}}, Mapping[str, Inner | int | None]) == [
        "either: expected Inner or int or NoneType, got {'size': 'x'}"
    ]
    assert decode(int | Mapping[str, int] | None, {"a": 1}) == {"a": 1}


def test_a_type_it_cannot_decode_is_a_programming_error() -> None:
    with pytest.raises(TypeError, match=r"typed decoder cannot handle <class 'bytes'> at inner.size"):
        decode(Mapping[str, bytes], {"inner.size": b""})
    with pytest.raises(TypeError, match=r"cannot handle <class 'bytes'> at inner.size"):
        decode(Mapping[str, bytes | None], {"inner.size": b""})  # inside a union's trial too
    with pytest.raises(TypeError, match=r"cannot handle <class 'bytes'> at <root>"):
        decode(bytes, b"")


def test_encode_is_plain_data_in_field_order() -> None:
    value = decode(Outer, with_(tags=["p"], env={"K": "v"}, extra={"t": (1, 2)}))
    plain = encode(value)
    assert list(plain) == ["name", "inner", "flag", "tags", "env", "extra", "note", "mode", "level", "plain", "items"]
    assert plain["inner"] == {"size": 3, "ratio": 0.5} and plain["tags"] == ["p"]
    assert plain["env"] == {"K": "v"} and plain["extra"] == {"t": [1, 2]}
    assert encode(decode(Outer, plain)) == plain
    assert encode(Outer) is Outer  # a dataclass type is not a value
    assert encode([Inner(1), {"k": (Inner(2),)}]) == [{"size": 1, "ratio": 0.5}, {"k": [{"size": 2, "ratio": 0.5}]}]
