"""Where a step runs is placement: a `StepExecution` never enters the fingerprint, and what a
step job cannot run (a lambda, an unsized accelerator, no time limit) is refused when it is built."""

from __future__ import annotations

from typing import Any

import pytest

from rlaunch.artifacts import ArtifactStep, Directory
from rlaunch.step_jobs import StepExecution, StepFunctionError


def build(config: dict[str, Any]) -> None:
    return None


def step(execution: Any = None, run: Any = build) -> ArtifactStep[Directory]:
    return ArtifactStep(
        name="t/eval",
        version="2026.01.01",
        artifact_type=Directory,
        run=run,
        build_config=lambda ctx: {"output_path": ctx.output_path, "n": 16},
        execution=execution,
    )


def test_placement_never_enters_the_fingerprint() -> None:
    here = step()
    small = step(StepExecution(runtime="trl-cpu"))
    large = step(StepExecution(runtime="skyrl", accelerators=8, accelerator_type="H100", nodes=2, cpu=64.0,
                               memory="1TB", disk="2TB", time_limit_seconds=7200, max_retries=3))  # fmt: skip
    assert here.fingerprint == small.fingerprint == large.fingerprint
    assert here.fingerprint_payload == large.fingerprint_payload


def test_a_step_job_function_must_be_importable_by_name() -> None:
    with pytest.raises(StepFunctionError, match=r"t/eval: run=.*lambda"):
        step(StepExecution(), run=lambda config: None)
    step(run=lambda config: None)  # in the coordinator a lambda is fine


def test_an_execution_of_another_family_is_refused() -> None:
    with pytest.raises(TypeError, match="execution must be a StepExecution"):
        step({"gpus": 8})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"accelerators": 8}, r"accelerators=8 needs accelerator_type"),
        ({"time_limit_seconds": 0}, r"time_limit_seconds=0 must be positive"),
        ({"nodes": 0}, r"nodes=0 must be at least 1"),
        ({"cpu": 0}, r"cpu=0 must be a positive"),
        ({"memory": "lots"}, r"StepExecution.memory"),
        ({"accelerators": -1, "accelerator_type": "H100"}, r"accelerators=-1 cannot be negative"),
    ],
)
def test_bad_placement_names_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        StepExecution(**fields)


def test_gpu_hours_are_every_nodes_devices_for_the_whole_limit() -> None:
    assert StepExecution(accelerators=8, accelerator_type="H100", nodes=2, time_limit_seconds=5400).gpu_hours == 24.0
    assert StepExecution(cpu=4.0, time_limit_seconds=5400).gpu_hours == 0.0
