"""ArtifactStep: a frozen handle; constructing one (or a whole graph) runs nothing."""

from __future__ import annotations

import dataclasses

import pytest

from rlaunch.artifacts import ArtifactStep, Directory, GraphError, graph_handles

from .helpers import DAY, Count, make_step


def test_handle_carries_what_it_was_given():
    def run(config):
        return None

    def build(ctx):
        return {"a": 1}

    up = make_step("up")
    step = ArtifactStep(
        name="models/tiny",
        version="2026.11.30.2",
        artifact_type=Count,
        run=run,
        build_config=build,
        deps=[up],
        runtime_args={"nodes": 2},
    )
    assert (step.name, step.version, step.artifact_type, step.run, step.build_config) == (
        "models/tiny",
        "2026.11.30.2",
        Count,
        run,
        build,
    )
    assert step.deps == (up,) and isinstance(step.deps, tuple)
    assert dict(step.runtime_args) == {"nodes": 2}
    assert step.identity == "models/tiny@2026.11.30.2"
    assert not step.mutable and make_step("x", "alice-dev").mutable
    assert repr(step) == "ArtifactStep(models/tiny@2026.11.30.2)"


def test_handle_is_frozen():
    step = make_step("a", runtime_args={"k": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.version = "2026.12.01"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        step.deps = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        step.runtime_args["k"] = 2  # type: ignore[index]


def test_runtime_args_are_copied_at_construction():
    args = {"k": 1}
    step = make_step("a", runtime_args=args)
    args["k"] = 2
    assert step.runtime_args["k"] == 1


def test_constructing_a_graph_runs_nothing():
    calls = []

    def run(config):
        calls.append("run")

    def build(ctx):
        calls.append("build_config")
        return {}

    a = ArtifactStep(name="a", version=DAY, artifact_type=Directory, run=run, build_config=build)
    b = ArtifactStep(name="b", version=DAY, artifact_type=Directory, run=run, build_config=build, deps=(a,))
    graph_handles([b])
    assert calls == []


def test_artifact_type_must_be_an_artifact_subclass():
    with pytest.raises(TypeError, match="artifact_type"):
        ArtifactStep(name="a", version=DAY, artifact_type=dict, run=print, build_config=dict)  # type: ignore[arg-type]


def test_deps_must_be_handles():
    with pytest.raises(TypeError, match="deps must be ArtifactStep"):
        make_step("a", deps=("other@2026.11.30",))  # type: ignore[arg-type]


def test_handles_compare_by_object_identity():
    a1, a2 = make_step("a"), make_step("a")
    assert a1 == a1 and a1 != a2
    assert len({a1, a2}) == 2


def test_path_is_prefix_name_version(prefix):
    step = make_step("models/tiny")
    assert step.path("/data/p") == "/data/p/models/tiny/2026.11.30"
    assert step.path() == f"{prefix}/models/tiny/2026.11.30"


def test_graph_handles_lists_dependencies_first_each_once():
    a = make_step("a")
    b = make_step("b", deps=(a,))
    c = make_step("c", deps=(a,))
    d = make_step("d", deps=(b, c))
    order = graph_handles([d, c])
    assert [s.name for s in order] == ["a", "b", "c", "d"]


def test_two_equal_handles_for_one_identity_are_merged():
    a1 = make_step("a", literals={"x": 1})
    a2 = make_step("a", literals={"x": 1})
    order = graph_handles([make_step("b", deps=(a1,)), make_step("c", deps=(a2,))])
    assert [s.identity for s in order].count("a@2026.11.30") == 1


def test_two_different_recipes_under_one_identity_are_an_error():
    a1 = make_step("a", literals={"x": 1})
    a2 = make_step("a", literals={"x": 2})
    with pytest.raises(GraphError, match="a@2026.11.30"):
        graph_handles([make_step("b", deps=(a1,)), make_step("c", deps=(a2,))])


def test_a_very_deep_chain_does_not_hit_the_recursion_limit(prefix):
    from rlaunch.artifacts import plan_graph

    step = make_step("s0")
    for i in range(1, 3000):
        step = make_step(f"s{i}", deps=(step,))
    assert len(graph_handles([step])) == 3000
    planned = plan_graph([step], prefix)
    assert len(planned) == 3000 and planned[0].step.name == "s0"
