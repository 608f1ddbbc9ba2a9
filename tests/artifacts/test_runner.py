"""The runner: deps first, bounded concurrency, served outputs, drift, failures."""

from __future__ import annotations

import shutil
import sys
import threading
from dataclasses import dataclass

import pytest

from rlaunch.artifacts import (
    Artifact,
    ArtifactTypeMismatchError,
    FingerprintDriftError,
    GraphError,
    RunFailedError,
    Runner,
    records,
)

from .helpers import Count, Label, make_step, quiet


def _run(prefix, roots, messages=None, **kwargs):
    return Runner(prefix, report=quiet(messages if messages is not None else []), **kwargs).run(roots)


def _is_warning(message: str) -> bool:
    return message.strip().startswith("warning:")


def _diamond(recorder, sleep=0.0, version="2026.11.30"):
    a = make_step("a", version, recorder=recorder, sleep=sleep)
    b = make_step("b", version, deps=(a,), recorder=recorder, sleep=sleep)
    c = make_step("c", version, deps=(a,), recorder=recorder, sleep=sleep)
    d = make_step("d", version, deps=(b, c), recorder=recorder, sleep=sleep)
    return a, b, c, d


def test_dependencies_finish_before_their_dependents_start(any_prefix, recorder):
    a, b, c, d = _diamond(recorder, sleep=0.02)
    outcomes = _run(any_prefix, [d])
    assert sorted(recorder.calls) == ["a", "b", "c", "d"]
    position = {event: i for i, event in enumerate(recorder.events)}
    for step in (b, c, d):
        for dep in step.deps:
            assert position[("end", dep.name)] < position[("start", step.name)]
    assert [o.action for o in outcomes] == ["built"] * 4
    assert recorder.max_active == 2  # b and c ran side by side


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_at_most_max_concurrent_steps_run_at_once(prefix, recorder, limit):
    leaves = tuple(make_step(f"leaf{i}", recorder=recorder, sleep=0.08) for i in range(7))
    sink = make_step("sink", deps=leaves, recorder=recorder)
    _run(prefix, [sink], max_concurrent=limit)
    assert recorder.max_active == limit
    assert len(recorder.calls) == 8


def test_max_concurrent_must_be_positive(prefix):
    with pytest.raises(ValueError, match="max_concurrent"):
        Runner(prefix, max_concurrent=0)


def test_an_immutable_step_is_built_once_then_served(any_prefix, recorder):
    *_, d = _diamond(recorder)
    messages: list[str] = []
    _run(any_prefix, [d])
    outcomes = _run(any_prefix, [d], messages)
    assert len(recorder.calls) == 4
    assert [(o.identity, o.action) for o in outcomes] == [("d@2026.11.30", "served")]
    assert any("served from storage d@2026.11.30" in m for m in messages)


def test_a_served_step_does_not_rebuild_its_deps_even_if_they_are_gone(prefix, recorder):
    a, b, c, d = _diamond(recorder)
    _run(prefix, [d])
    shutil.rmtree(a.path(prefix))
    _run(prefix, [d])
    assert recorder.count("a") == 1


def test_a_served_value_is_loaded_from_the_record(prefix):
    step = make_step("n", artifact_type=Count, result=lambda c: Count(path="/elsewhere", value=5))
    built = _run(prefix, [step])[0].value
    served = _run(prefix, [step])[0].value
    assert built == Count(path="/elsewhere", value=5)
    assert served == Count(path=step.path(prefix), value=5)


def test_a_changed_recipe_under_the_same_version_warns_with_the_fields(prefix, recorder):
    old = make_step("m", literals={"lr": 0.1, "layers": 2}, recorder=recorder)
    _run(prefix, [old])
    new = make_step("m", literals={"lr": 0.2, "layers": 2}, recorder=recorder)
    messages: list[str] = []
    [outcome] = _run(prefix, [new], messages)
    assert outcome.action == "served" and outcome.drift == ["config.lr"]
    warning = [m for m in messages if _is_warning(m)]
    assert len(warning) == 1 and "m@2026.11.30" in warning[0] and "config.lr" in warning[0]
    assert "Bump the version" in warning[0]
    assert recorder.count("m") == 1


def test_a_dependency_bump_shows_as_drift(prefix):
    old = make_step("m", deps=(make_step("data", "2026.11.30"),))
    _run(prefix, [old])
    messages: list[str] = []
    # m@2026.11.30 is served (its new dependency is not needed for that) with a warning
    [outcome] = _run(prefix, [make_step("m", deps=(make_step("data", "2026.12.01"),))], messages)
    assert outcome.action == "served"
    assert "config.inputs[0]" in outcome.drift and "deps[0]" in outcome.drift
    assert any(_is_warning(m) and "deps[0]" in m for m in messages)


def test_no_warning_when_the_recipe_is_unchanged(prefix):
    _run(prefix, [make_step("m", literals={"lr": 0.1})])
    messages: list[str] = []
    [outcome] = _run(prefix, [make_step("m", literals={"lr": 0.1})], messages)
    assert outcome.drift == [] and not any(_is_warning(m) for m in messages)


def test_expected_fingerprint_turns_drift_into_an_error(prefix):
    _run(prefix, [make_step("m", literals={"lr": 0.1})])
    new_recipe = make_step("m", literals={"lr": 0.2})
    pinned = make_step("m", literals={"lr": 0.2}, expected_fingerprint=new_recipe.fingerprint)
    with pytest.raises(RunFailedError, match="m@2026.11.30") as err:
        _run(prefix, [pinned])
    [failed] = err.value.failed
    assert "FingerprintDriftError" in failed.error and "config.lr" in failed.error
    assert "bump the version" in failed.error
    assert issubclass(FingerprintDriftError, ValueError)


def test_a_mutable_step_always_rebuilds(any_prefix, recorder):
    step = make_step("m", "alice-dev", recorder=recorder)
    messages: list[str] = []
    _run(any_prefix, [step])
    [outcome] = _run(any_prefix, [step], messages)
    assert recorder.count("m") == 2 and outcome.action == "rebuilt"
    assert any("rebuilt (mutable) m@alice-dev" in m for m in messages)


def test_a_fixed_version_on_a_mutable_one_runs_nothing(prefix, recorder):
    dev = make_step("data", "dev", recorder=recorder)
    with pytest.raises(GraphError, match="data@dev"):
        _run(prefix, [make_step("m", deps=(dev,), recorder=recorder)])
    assert recorder.calls == []


def test_a_failed_step_fails_its_dependents_and_every_failure_is_named(prefix, recorder):
    a = make_step("a", recorder=recorder, fail=True)
    b = make_step("b", deps=(a,), recorder=recorder)
    c = make_step("c", deps=(b,), recorder=recorder)
    x = make_step("x", recorder=recorder, fail=True)
    ok = make_step("ok", recorder=recorder)
    messages: list[str] = []
    with pytest.raises(RunFailedError) as err:
        _run(prefix, [c, x, ok], messages)
    failed = {o.identity: o for o in err.value.failed}
    assert set(failed) == {"a@2026.11.30", "b@2026.11.30", "c@2026.11.30", "x@2026.11.30"}
    assert failed["a@2026.11.30"].action == "failed" and "boom in a" in failed["a@2026.11.30"].error
    assert failed["b@2026.11.30"].action == "skipped" and "a@2026.11.30" in failed["b@2026.11.30"].error
    assert failed["c@2026.11.30"].action == "skipped"
    for identity in failed:
        assert identity in str(err.value)
    assert sorted(recorder.calls) == ["a", "ok", "x"]
    assert records.is_succeeded(ok.path(prefix))
    assert any("FAILED a@2026.11.30" in m for m in messages)


def test_a_step_calling_sys_exit_fails_only_itself(prefix):
    step = make_step("quits", run=lambda config: sys.exit(3))
    with pytest.raises(RunFailedError, match="quits@2026.11.30"):
        _run(prefix, [step])
    assert records.read_status(step.path(prefix))["state"] == "failed"


def test_a_stored_value_of_another_type_is_an_error_that_says_bump_the_version(prefix):
    _run(prefix, [make_step("m", artifact_type=Count, result=lambda c: Count(path=c["output_path"], value=1))])
    relabelled = make_step("m", artifact_type=Label, result=lambda c: Label(path=c["output_path"], text="x"))
    with pytest.raises(RunFailedError) as err:
        _run(prefix, [relabelled])
    [failed] = err.value.failed
    assert "ArtifactTypeMismatchError" in failed.error
    assert Count.type_name() in failed.error and Label.type_name() in failed.error
    assert "bump the version" in failed.error


def _versioned_class(with_field: bool):
    if with_field:

        @dataclass(frozen=True)
        class Result(Artifact):
            score: float

    else:

        @dataclass(frozen=True)
        class Result(Artifact):  # type: ignore[no-redef]
            accuracy: float

    return Result


def test_a_stored_value_whose_fields_no_longer_fit_says_bump_the_version(prefix):
    old, new = _versioned_class(True), _versioned_class(False)
    assert old.type_name() == new.type_name()
    _run(prefix, [make_step("m", artifact_type=old, result=lambda c: old(path=c["output_path"], score=0.5))])
    with pytest.raises(ArtifactTypeMismatchError, match="bump the version"):
        new.load(make_step("m").path(prefix))


def test_run_returning_the_wrong_type_fails(prefix):
    step = make_step("m", artifact_type=Count, result=lambda c: Label(path=c["output_path"], text="no"))
    with pytest.raises(RunFailedError) as err:
        _run(prefix, [step])
    assert "expected" in err.value.failed[0].error and Count.type_name() in err.value.failed[0].error
    assert records.read_record(step.path(prefix)) is None


def test_run_returning_none_for_a_valued_type_fails(prefix):
    with pytest.raises(RunFailedError, match="m@2026.11.30") as err:
        _run(prefix, [make_step("m", artifact_type=Count)])
    assert "value fields" in err.value.failed[0].error


def test_each_outcome_is_reported(prefix):
    a = make_step("a")
    b = make_step("b", deps=(a,))
    messages: list[str] = []
    _run(prefix, [b], messages)
    assert any(m.strip().startswith("building a@2026.11.30") for m in messages)
    assert any(m.strip().startswith("built b@2026.11.30") and b.path(prefix) in m for m in messages)


def test_the_runner_defaults_to_the_configured_prefix(prefix, recorder):
    step = make_step("a", recorder=recorder)
    Runner(report=quiet([])).run([step])
    assert records.is_succeeded(f"{prefix}/a/2026.11.30")


def _waits_for(event: threading.Event):
    """A step body that needs another step to start while it runs (no sleeps: it waits on `event`)."""

    def run(config):
        if not event.wait(timeout=10):
            raise RuntimeError("the other step never started while this one ran")

    return run


def _signals(event: threading.Event):
    def run(config):
        event.set()

    return run


def test_a_free_slot_is_filled_as_soon_as_any_running_step_finishes(prefix):
    started = threading.Event()
    long = make_step("long", run=_waits_for(started))
    short = make_step("short")
    third = make_step("third", run=_signals(started))  # can only start once `short` frees its slot
    outcomes = _run(prefix, [long, short, third], max_concurrent=2)
    assert [o.action for o in outcomes] == ["built"] * 3


def test_a_step_waiting_for_its_dependencies_does_not_hold_up_independent_ones(prefix):
    started = threading.Event()
    first = make_step("first", run=_waits_for(started))
    blocked = make_step("blocked", deps=(first,))
    free = make_step("free", run=_signals(started))  # listed after the blocked step
    outcomes = _run(prefix, [blocked, free])
    assert [o.identity for o in outcomes] == ["first@2026.11.30", "blocked@2026.11.30", "free@2026.11.30"]
    assert all(o.action == "built" for o in outcomes)


def test_skipping_a_dependent_does_not_hold_up_the_steps_after_it(prefix):
    started = threading.Event()
    long = make_step("long", run=_waits_for(started))
    broken = make_step("broken", fail=True)
    dependent = make_step("dependent", deps=(broken,))
    free = make_step("free", run=_signals(started))  # no slot for it until `broken` fails
    with pytest.raises(RunFailedError) as err:
        _run(prefix, [long, dependent, free], max_concurrent=2)
    assert [(o.identity, o.action) for o in err.value.failed] == [
        ("broken@2026.11.30", "failed"),
        ("dependent@2026.11.30", "skipped"),
    ]
