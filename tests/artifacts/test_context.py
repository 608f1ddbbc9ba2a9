"""StepContext: literals bear identity; what comes from the context does not."""

from __future__ import annotations

import pytest

from rlaunch.artifacts import (
    FingerprintTimeError,
    RunFailedError,
    Runner,
    StepContext,
    UndeclaredDependencyError,
    UndeclaredRuntimeArgError,
)

from .helpers import Count, make_step, quiet


def test_fingerprint_context_hands_out_placeholders(monkeypatch):
    monkeypatch.setenv("RLAUNCH_REGION", "us-east1")
    dep = make_step("data/toy")
    step = make_step("m", deps=(dep,), runtime_args={"nodes": 4})
    ctx = StepContext.for_fingerprint(step)
    assert ctx.is_fingerprint
    assert ctx.output_path == "<output_path>"
    assert ctx.prefix == "<prefix>"
    assert ctx.region == "<region>"
    assert ctx.artifact_path(dep) == "<data/toy@2026.11.30>"
    assert ctx.runtime_arg("nodes") == "<nodes>"


def test_run_context_hands_out_real_values(monkeypatch, prefix):
    monkeypatch.setenv("RLAUNCH_REGION", "us-east1")
    dep = make_step("data/toy")
    step = make_step("m", deps=(dep,), runtime_args={"nodes": 4})
    ctx = StepContext.for_run(step, prefix)
    assert not ctx.is_fingerprint
    assert ctx.output_path == f"{prefix}/m/2026.11.30"
    assert ctx.prefix == prefix
    assert ctx.region == "us-east1"
    assert ctx.artifact_path(dep) == f"{prefix}/data/toy/2026.11.30"
    assert ctx.runtime_arg("nodes") == 4


def test_reading_an_undeclared_dependency_names_it():
    declared, stranger = make_step("declared"), make_step("stranger")
    step = make_step("m", deps=(declared,))
    for ctx in (StepContext.for_fingerprint(step), StepContext.for_run(step, "/p")):
        with pytest.raises(UndeclaredDependencyError, match="stranger@2026.11.30") as err:
            ctx.artifact_path(stranger)
        assert "m@2026.11.30" in str(err.value)
        with pytest.raises(UndeclaredDependencyError, match="stranger@2026.11.30"):
            ctx.resolved(stranger)


def test_a_dependency_with_the_same_identity_but_another_handle_is_undeclared():
    declared = make_step("dep")
    step = make_step("m", deps=(declared,))
    with pytest.raises(UndeclaredDependencyError):
        StepContext.for_fingerprint(step).artifact_path(make_step("dep"))


def test_reading_an_undeclared_runtime_arg_names_it():
    step = make_step("m", runtime_args={"nodes": 1})
    for ctx in (StepContext.for_fingerprint(step), StepContext.for_run(step, "/p")):
        with pytest.raises(UndeclaredRuntimeArgError) as err:
            ctx.runtime_arg("gpus")
        assert "'gpus'" in str(err.value) and "nodes" in str(err.value)
        assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)


def test_undeclared_reads_inside_build_config_fail_the_fingerprint():
    stranger = make_step("stranger")
    step = make_step("m", build_config=lambda ctx: {"p": ctx.artifact_path(stranger)})
    with pytest.raises(UndeclaredDependencyError, match="stranger"):
        _ = step.fingerprint


def test_loaded_values_are_unavailable_while_fingerprinting():
    dep = make_step("dep", artifact_type=Count)
    step = make_step("m", deps=(dep,))
    with pytest.raises(FingerprintTimeError, match="dep@2026.11.30"):
        StepContext.for_fingerprint(step).resolved(dep)


def test_resolved_loads_the_dependency_value_once_at_run_time(prefix):
    dep = make_step("dep", artifact_type=Count, result=lambda c: Count(path=c["output_path"], value=7))
    seen = []

    def build(ctx):
        config = {"output_path": ctx.output_path, "src": ctx.artifact_path(dep)}
        if not ctx.is_fingerprint:
            first = ctx.resolved(dep)
            assert ctx.resolved(dep) is first
            config["value"] = first.value
            seen.append(first)
        return config

    step = make_step("m", deps=(dep,), build_config=build, result=None)
    Runner(prefix, report=quiet([])).run([step])
    assert seen[0].value == 7 and seen[0].path == dep.path(prefix)


def test_a_context_value_does_not_leak_into_identity(prefix, monkeypatch):
    dep = make_step("dep")
    step = make_step("m", deps=(dep,), runtime_args={"nodes": 4})
    messages: list[str] = []
    Runner(prefix, report=quiet(messages)).run([step])
    from rlaunch.artifacts import records

    record = records.read_record(step.path(prefix))
    assert record["config"]["output_path"] == step.path(prefix)  # the real value was materialised
    assert record["fingerprint_payload"]["config"]["output_path"] == "<output_path>"
    assert record["fingerprint_payload"]["config"]["inputs"] == ["<dep@2026.11.30>"]


def test_a_builder_failing_at_run_time_fails_the_step(prefix):
    def build(ctx):
        if not ctx.is_fingerprint:
            ctx.runtime_arg("missing")
        return {}

    step = make_step("m", build_config=build)
    with pytest.raises(RunFailedError, match="m@2026.11.30") as err:
        Runner(prefix, report=quiet([])).run([step])
    assert "missing" in err.value.failed[0].error
