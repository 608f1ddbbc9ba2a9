"""The plan: what a run would do with each step, decided from storage reads only."""

from __future__ import annotations

import os

import pytest

from rlaunch.artifacts import GraphError, Runner, plan_graph, records

from .helpers import make_step, quiet


def _actions(planned):
    return [(p.step.identity, p.action) for p in planned]


def _chain(version="2026.11.30"):
    a = make_step("a", version)
    b = make_step("b", version, deps=(a,))
    c = make_step("c", version, deps=(b,))
    return a, b, c


def test_a_fresh_prefix_runs_everything_deps_first(prefix):
    a, b, c = _chain()
    planned = plan_graph([c], prefix)
    assert _actions(planned) == [("a@2026.11.30", "run"), ("b@2026.11.30", "run"), ("c@2026.11.30", "run")]
    assert [p.path for p in planned] == [s.path(prefix) for s in (a, b, c)]


def test_planning_writes_nothing(prefix):
    plan_graph([_chain()[2]], prefix)
    assert not os.path.exists(prefix)


@pytest.mark.parametrize(
    ("built", "actions"),
    [
        ("c", ["unneeded", "unneeded", "serve"]),
        ("b", ["unneeded", "serve", "run"]),
    ],
    ids=["c-built", "b-built"],
)
def test_a_built_immutable_step_is_served_and_its_deps_are_not_needed(any_prefix, built, actions):
    steps = dict(zip("abc", _chain()))
    Runner(any_prefix, report=quiet([])).run([steps[built]])
    assert _actions(plan_graph([steps["c"]], any_prefix)) == [(f"{n}@2026.11.30", x) for n, x in zip("abc", actions)]


def test_a_new_step_on_built_deps_runs_and_serves_the_deps(prefix):
    a, b, _ = _chain()
    Runner(prefix, report=quiet([])).run([b])
    d = make_step("d", deps=(b,))
    assert _actions(plan_graph([d], prefix)) == [
        ("a@2026.11.30", "unneeded"),
        ("b@2026.11.30", "serve"),
        ("d@2026.11.30", "run"),
    ]


def test_a_dep_needed_by_one_consumer_is_needed_even_if_another_is_served(prefix):
    a = make_step("a")
    served = make_step("served", deps=(a,))
    Runner(prefix, report=quiet([])).run([served])
    records.write_status(a.path(prefix), records.FAILED)  # a must run again for the new consumer
    fresh = make_step("fresh", deps=(a,))
    assert dict(_actions(plan_graph([served, fresh], prefix))) == {
        "a@2026.11.30": "run",
        "served@2026.11.30": "serve",
        "fresh@2026.11.30": "run",
    }


def test_mutable_steps_always_rebuild(prefix):
    a = make_step("a", "alice-dev")
    b = make_step("b", "dev", deps=(a,))
    Runner(prefix, report=quiet([])).run([b])
    assert records.is_succeeded(b.path(prefix))
    assert _actions(plan_graph([b], prefix)) == [("a@alice-dev", "rebuild"), ("b@dev", "rebuild")]


def test_a_mutable_step_may_depend_on_a_fixed_one(prefix):
    a = make_step("a")
    b = make_step("b", "dev", deps=(a,))
    assert _actions(plan_graph([b], prefix)) == [("a@2026.11.30", "run"), ("b@dev", "rebuild")]


def test_a_failed_or_running_immutable_step_runs_again(prefix):
    a = make_step("a")
    for state in (records.FAILED, records.RUNNING):
        records.write_status(a.path(prefix), state)
        assert _actions(plan_graph([a], prefix)) == [("a@2026.11.30", "run")]


def test_a_fixed_version_may_not_depend_on_a_mutable_one(prefix):
    dev = make_step("data", "alice-dev")
    fixed = make_step("model", "2026.11.30", deps=(dev,))
    with pytest.raises(GraphError) as err:
        plan_graph([make_step("eval", "dev", deps=(fixed,))], prefix)
    assert "model@2026.11.30" in str(err.value) and "data@alice-dev" in str(err.value)


def test_every_violation_is_reported(prefix):
    dev = make_step("data", "dev")
    one = make_step("one", deps=(dev,))
    two = make_step("two", deps=(dev,))
    with pytest.raises(GraphError) as err:
        plan_graph([one, two], prefix)
    assert "one@2026.11.30" in str(err.value) and "two@2026.11.30" in str(err.value)


def test_planned_step_json(prefix):
    a, b, _ = _chain()
    entry = plan_graph([b], prefix)[1].to_json()
    assert entry == {
        "name": "b",
        "version": "2026.11.30",
        "identity": "b@2026.11.30",
        "fingerprint": b.fingerprint,
        "type": "rlaunch.artifacts.artifact.Directory",
        "mutable": False,
        "action": "run",
        "path": b.path(prefix),
        "deps": ["a@2026.11.30"],
    }
