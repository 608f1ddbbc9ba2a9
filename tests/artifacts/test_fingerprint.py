"""Fingerprints: sha256 of the canonical JSON of the config built under placeholders."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import hashlib
import json
import os
import pathlib
import runpy
import subprocess
import sys
import types

import pytest

from rlaunch.artifacts import (
    ArtifactStep,
    CanonicalizationError,
    Directory,
    FingerprintMismatchError,
    canonical_json,
    plan_graph,
)
from rlaunch.artifacts.fingerprint import (
    ABSENT,
    canonical_value,
    diff_paths,
    differences,
    fingerprint_hash,
    qualified_name,
    short,
)

from .helpers import Count, Label, make_step

PROBE = pathlib.Path(__file__).with_name("_fingerprint_probe.py")


def test_fingerprint_is_sha256_of_the_canonical_payload():
    step = make_step("a", literals={"lr": 0.1, "layers": [1, 2]})
    assert len(step.fingerprint) == 64
    assert step.fingerprint == hashlib.sha256(step.fingerprint_payload.encode()).hexdigest()
    payload = json.loads(step.fingerprint_payload)
    assert payload["config"] == {"output_path": "<output_path>", "inputs": [], "lr": 0.1, "layers": [1, 2]}
    assert payload["type"] == "rlaunch.artifacts.artifact.Directory"
    assert step.fingerprint_payload == canonical_json(payload)  # already canonical


def test_a_literal_change_changes_the_fingerprint():
    assert make_step("a", literals={"lr": 0.1}).fingerprint != make_step("a", literals={"lr": 0.2}).fingerprint
    assert make_step("a", literals={"lr": 0.1}).fingerprint == make_step("a", literals={"lr": 0.1}).fingerprint
    assert make_step("a", literals={"n": 1}).fingerprint != make_step("a", literals={"n": "1"}).fingerprint


def test_the_artifact_type_is_part_of_the_fingerprint():
    assert make_step("a", artifact_type=Count).fingerprint != make_step("a", artifact_type=Label).fingerprint


def test_a_dependency_version_change_changes_the_fingerprint():
    old = make_step("m", deps=(make_step("data", "2026.11.30"),))
    new = make_step("m", deps=(make_step("data", "2026.12.01"),))
    assert old.fingerprint != new.fingerprint


def test_a_dependency_version_change_counts_even_when_the_config_ignores_its_path():
    def builder(ctx):
        return {"lr": 0.1}  # reads the dependency only at run time (ctx.resolved)

    old = make_step("m", deps=(make_step("data", "2026.11.30"),), build_config=builder)
    new = make_step("m", deps=(make_step("data", "2026.12.01"),), build_config=builder)
    assert old.fingerprint != new.fingerprint


def test_placement_does_not_change_the_fingerprint(monkeypatch):
    dep = make_step("data/toy")

    def builder(ctx):
        return {
            "data": ctx.artifact_path(dep),
            "out": ctx.output_path,
            "prefix": ctx.prefix,
            "region": ctx.region,
            "nodes": ctx.runtime_arg("nodes"),
            "resources": ctx.runtime_arg("resources"),
        }

    def fingerprint_with(prefix, region, nodes, resources):
        monkeypatch.setenv("RLAUNCH_PREFIX", prefix)
        monkeypatch.setenv("RLAUNCH_REGION", region)
        step = make_step("m", deps=(dep,), build_config=builder, runtime_args={"nodes": nodes, "resources": resources})
        plan_graph([step], prefix)  # planning under that prefix must not change it either
        return step.fingerprint

    a = fingerprint_with("/tmp/one", "us-east1", 1, {"cpu": 2, "memory": "8Gi"})
    b = fingerprint_with("memory://elsewhere/", "eu-west4", 64, {"cpu": 64, "memory": "512Gi", "gpu": "H100x8"})
    assert a == b


def test_dict_insertion_order_and_set_order_do_not_matter():
    a = make_step("m", literals={"x": 1, "y": {"b": 2, "a": 1}, "s": {"q", "r", "p"}})
    b = make_step("m", literals={"y": {"a": 1, "b": 2}, "s": {"p", "q", "r"}, "x": 1})
    assert a.fingerprint == b.fingerprint


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass(frozen=True)
class Opt:
    lr: float
    cache: dict = dataclasses.field(default_factory=dict, compare=False)


def test_canonical_forms_of_plain_values():
    dep = make_step("dep")
    assert canonical_value((1, 2)) == [1, 2]
    assert canonical_value(Color.RED) == "red"
    assert canonical_value(Opt(lr=0.5, cache={"x": object()})) == {"lr": 0.5}  # compare=False fields skipped
    assert canonical_value(pathlib.PurePosixPath("a/b")) == "a/b"
    assert canonical_value(frozenset({3, 1, 2})) == {"__set__": [1, 2, 3]}
    assert canonical_value(dep) == "dep@2026.11.30"
    assert canonical_value(Directory) == "rlaunch.artifacts.artifact.Directory"
    assert canonical_value(ArtifactStep) == "rlaunch.artifacts.step.ArtifactStep"  # a class, not a handle
    assert canonical_json({"b": 1, "a": [1.5, None, True]}) == '{"a":[1.5,null,true],"b":1}'


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"fn": print}, "config.fn"),
        ({"nested": [1, {"cb": lambda x: x}]}, "config.nested[1].cb"),
        ({"obj": Opaque()}, "config.obj"),
        ({"obj": object()}, "config.obj"),
        ({"gen": (i for i in range(2))}, "config.gen"),
        ({"nan": float("nan")}, "config.nan"),
        ({"inf": float("inf")}, "config.inf"),
        ({1: "int key"}, "config"),
        ({"bytes": b"raw"}, "config.bytes"),
    ],
)
def test_values_without_a_canonical_form_are_errors_naming_their_path(value, where):
    with pytest.raises(CanonicalizationError) as err:
        canonical_json(value)
    assert str(err.value).startswith(where)


def test_an_uncanonicalisable_config_fails_the_fingerprint_and_the_plan(tmp_path):
    step = make_step("m", literals={"callback": lambda: 1})
    with pytest.raises(CanonicalizationError, match="callback"):
        _ = step.fingerprint
    with pytest.raises(CanonicalizationError):
        plan_graph([make_step("n", deps=(step,))], str(tmp_path))


def test_expected_fingerprint_pins_the_recipe():
    step = make_step("m", literals={"lr": 0.1})
    full = step.fingerprint
    assert make_step("m", literals={"lr": 0.1}, expected_fingerprint=full).fingerprint == full
    assert make_step("m", literals={"lr": 0.1}, expected_fingerprint=full[:12]).fingerprint == full
    pinned = make_step("m", literals={"lr": 0.2}, expected_fingerprint=full[:12])
    with pytest.raises(FingerprintMismatchError, match="m@2026.11.30") as err:
        _ = pinned.fingerprint
    assert full[:12] in str(err.value) and "bump the version" in str(err.value)


def test_diff_paths_names_the_fields_that_differ():
    old = {"config": {"lr": 0.1, "layers": [1, 2], "gone": 1}, "type": "T"}
    new = {"config": {"lr": 0.2, "layers": [1, 3], "added": 1}, "type": "T"}
    assert diff_paths(old, new) == ["config.added", "config.gone", "config.layers[1]", "config.lr"]
    assert diff_paths(old, old) == []


def test_a_class_run_as_main_is_named_by_its_module(monkeypatch):
    cls = type("Thing", (), {"__module__": "__main__", "__qualname__": "Thing"})
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", types.SimpleNamespace(name="experiments.hello"))
    assert qualified_name(cls) == "experiments.hello.Thing"
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", None)
    assert qualified_name(cls) == "__main__.Thing"


def _probe_in_subprocess(tmp_path, seed: str, prefix: str, region: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONHASHSEED": seed, "RLAUNCH_PREFIX": prefix, "RLAUNCH_REGION": region}
    out = subprocess.run(
        [sys.executable, str(PROBE)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60, check=True
    )
    return json.loads(out.stdout)


def test_the_same_fingerprint_in_every_process(tmp_path):
    here = runpy.run_path(str(PROBE))["fingerprints"]()
    assert len(here) == 2
    for seed, prefix, region in [("1", "/tmp/a", "us"), ("4242", "memory://b/", "eu")]:
        assert _probe_in_subprocess(tmp_path, seed, prefix, region) == here


@dataclasses.dataclass(frozen=True)
class Zeta:
    z: int
    a: int


@dataclasses.dataclass(frozen=True)
class Mu:
    m: int


@dataclasses.dataclass(frozen=True)
class Schedule:
    warmup: datetime.timedelta
    start: datetime.date
    color: Color
    tags: frozenset


def test_the_canonical_text_of_every_kind_of_value_is_fixed():
    """Stored fingerprints are compared across releases: this text must never change."""
    config = {
        "when": datetime.datetime(2026, 11, 30, 12, 30, 5),
        "day": datetime.date(2026, 11, 30),
        "warmup": datetime.timedelta(days=1, seconds=2, microseconds=3),
        "path": pathlib.PurePosixPath("data/train"),
        "color": Color.RED,
        "type": Count,
        "schedule": Schedule(datetime.timedelta(minutes=1), datetime.date(2026, 1, 2), Color.RED, frozenset({"x"})),
        "set": {10, 9},  # members sorted by their JSON text: "10" before "9"
        "records": {Zeta(z=1, a=2), Mu(m=3)},  # each member's JSON text with sorted keys
        "text": "café",
        "nested": ((1, 2.5), [None, True, False]),
        "big": 2**70,
    }
    expected = (
        '{"big":1180591620717411303424,"color":"red","day":"2026-11-30",'
        '"nested":[[1,2.5],[null,true,false]],"path":"data/train",'
        '"records":{"__set__":[{"a":2,"z":1},{"m":3}]},'
        '"schedule":{"color":"red","start":"2026-01-02","tags":{"__set__":["x"]},"warmup":{"__timedelta__":[0,60,0]}},'
        '"set":{"__set__":[10,9]},"text":"caf\\u00e9","type":"tests.artifacts.helpers.Count",'
        '"warmup":{"__timedelta__":[1,2,3]},"when":"2026-11-30T12:30:05"}'
    )
    assert canonical_json(config) == expected
    assert hashlib.sha256(expected.encode("ascii")).hexdigest() == fingerprint_hash(expected)


def test_a_fingerprint_is_the_sha256_hex_of_the_payload_text():
    assert fingerprint_hash("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert fingerprint_hash('{"a":1}') == hashlib.sha256(b'{"a":1}').hexdigest()
    assert short("0123456789abcdef" * 4) == "0123456789ab"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            {"opt": Opt(lr=float("nan"))},
            "config.opt.lr: nan has no canonical JSON form; use a string or None",
        ),
        ({"s": frozenset({float("inf")})}, "config.s{}: inf has no canonical JSON form; use a string or None"),
        ({"t": (1, -float("inf"))}, "config.t[1]: -inf has no canonical JSON form; use a string or None"),
        ({"m": {"ok": {2: "x"}}}, "config.m.ok: mapping key 2 is not a string; use string keys"),
        (
            {"e": Color, "fn": len},
            "config.fn: <built-in function len> is a callable; a config must hold data, not functions "
            "(refer to registered names instead)",
        ),
        (
            {"raw": b"x"},
            "config.raw: cannot canonicalise bytes value b'x'; convert it to plain data "
            "(str, int, float, bool, list, dict or a dataclass)",
        ),
    ],
)
def test_an_uncanonicalisable_value_is_refused_naming_its_path_and_the_fix(value, message):
    with pytest.raises(CanonicalizationError) as err:
        canonical_value(value)
    assert str(err.value) == message


def test_a_value_refused_at_a_named_root_names_that_root():
    with pytest.raises(CanonicalizationError, match=r"^result\.score: nan "):
        canonical_value({"score": float("nan")}, "result")


@pytest.mark.parametrize(
    ("old", "new", "paths"),
    [
        (1, 2, ["<root>"]),
        ({"a": 1}, [1], ["<root>"]),
        ({"a": [1, 2]}, {"a": [1, 2, 3]}, ["a"]),  # lists of another length differ as a whole
        ({"a": [{"b": 1}, {"b": 2}]}, {"a": [{"b": 1}, {"b": 3}]}, ["a[1].b"]),
        ([[1, 2], [3]], [[1, 5], [4]], ["[0][1]", "[1][0]"]),
        ({"x": {"y": 1}}, {"x": {"z": 1}}, ["x.y", "x.z"]),
        ({"x": {"y": 1}}, {"x": 1}, ["x"]),
        ({"b": 1, "a": 1}, {"b": 2, "a": 2}, ["a", "b"]),
        ({"a": None}, {"a": None}, []),
    ],
)
def test_diff_paths_names_each_differing_leaf(old, new, paths):
    assert diff_paths(old, new) == paths
    assert diff_paths(new, old) == paths


def test_differences_give_both_values_and_absent_for_a_missing_key():
    old, new = {"a": 1, "b": [1, 2], "c": {"d": "x"}}, {"b": [1, 3], "c": {"d": "x"}, "e": None}
    assert list(differences(old, new)) == [("a", 1, ABSENT), ("b[1]", 2, 3), ("e", ABSENT, None)]
    assert list(differences(old, old)) == []


def test_a_class_run_as_main_without_a_module_name_keeps_main(monkeypatch):
    cls = type("Thing", (), {"__module__": "__main__", "__qualname__": "Outer.Thing"})
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", types.SimpleNamespace(name=""))
    assert qualified_name(cls) == "__main__.Outer.Thing"
    other = type("Thing", (), {"__module__": "pkg.mod", "__qualname__": "Thing"})
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", types.SimpleNamespace(name="experiments.hello"))
    assert qualified_name(other) == "pkg.mod.Thing"  # only __main__ is renamed


class Bad(enum.Enum):
    RATE = float("nan")


def test_an_enum_whose_value_has_no_canonical_form_is_refused_at_its_path():
    with pytest.raises(CanonicalizationError) as err:
        canonical_value({"schedule": Bad.RATE})
    assert str(err.value) == "config.schedule: nan has no canonical JSON form; use a string or None"


def test_a_class_is_named_even_without_a_main_module(monkeypatch):
    """An embedding interpreter (or a test runner) may have no `__main__` module at all."""
    cls = type("Thing", (), {"__module__": "__main__", "__qualname__": "Thing"})
    monkeypatch.delitem(sys.modules, "__main__")
    assert qualified_name(cls) == "__main__.Thing"
