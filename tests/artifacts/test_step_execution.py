"""Where a step runs is placement: a `StepExecution` never enters the fingerprint, and what a
step job cannot run (a lambda, an unsized accelerator, no time limit) is refused when it is built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rlaunch.artifacts import ArtifactStep, Directory, records
from rlaunch.artifacts.plan import SubmissionPathError
from rlaunch.artifacts.runner import RunFailedError, Runner
from rlaunch.step_jobs import StepExecution, StepFunctionError, StepInput, StepJobRequest
from tests.artifacts.helpers import Count


def build(config: dict[str, Any]) -> None:
    return None


def step(
    execution: Any = None,
    run: Any = build,
    *,
    kind: type[ArtifactStep[Any]] = ArtifactStep,
    build_config: Any = None,
    **fields: Any,
) -> ArtifactStep[Any]:
    """The step `t/eval@2026.01.01` (a Directory), with `fields` changed."""
    made: ArtifactStep[Any] = kind(
        **{
            "name": "t/eval",
            "version": "2026.01.01",
            "artifact_type": Directory,
            "run": run,
            "build_config": build_config or (lambda ctx: {"output_path": ctx.output_path, "n": 16}),
            "execution": execution,
            **fields,
        }
    )
    return made


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


class RecordingStepJobs:
    """The step-job path as the runner sees it (`StepJobs`): records each request, answers `values`."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.requests: list[StepJobRequest] = []
        self.values = values

    def run(self, request: StepJobRequest, report: Any) -> dict[str, Any]:
        self.requests.append(request)
        report(f"step job {request.name} done")
        return self.values


def test_a_step_with_a_step_execution_is_handed_to_the_step_job_path(prefix: str, tmp_path: Path) -> None:
    prefix = str(tmp_path / "runner-prefix")  # not RLAUNCH_PREFIX: every path is the runner's own
    data = step(name="t/data", build_config=lambda ctx: {"output_path": ctx.output_path})
    execution = StepExecution(runtime="trl-cpu", cpu=2.0)
    evaluation = step(
        execution,
        version="2026.01.02",
        artifact_type=Count,
        build_config=lambda ctx: {"output_path": ctx.output_path, "data": ctx.artifact_path(data), "n": 16},
        deps=(data,),
    )
    jobs, said = RecordingStepJobs({"value": 7}), []
    outcomes = Runner(prefix, report=said.append, step_jobs=jobs).run([evaluation])
    path = evaluation.path(prefix)
    (request,) = jobs.requests
    data_fingerprint = (records.read_record(data.path(prefix)) or {})["fingerprint"]
    assert request == StepJobRequest(
        identity="t/eval@2026.01.02",
        name="t/eval",
        version="2026.01.02",
        fingerprint=evaluation.fingerprint,
        output_path=path,
        prefix=prefix,
        function=f"{__name__}:build",
        config={"output_path": path, "data": data.path(prefix), "n": 16},
        inputs=(StepInput(f"t/data@2026.01.01:{data_fingerprint}", data.path(prefix)),),
        execution=execution,
    )
    assert "step job t/eval done" in said
    (built,) = [o for o in outcomes if o.identity == "t/eval@2026.01.02"]
    assert built.value == Count(path=path, value=7)
    assert (records.read_record(path) or {})["output_path"] == path


def test_a_runner_without_a_step_job_path_refuses_such_a_step(prefix: str) -> None:
    evaluation = step(StepExecution(runtime="trl-cpu"))
    with pytest.raises(RunFailedError) as failed:
        Runner(prefix, report=lambda message: None).run([evaluation])
    (outcome,) = failed.value.failed
    assert outcome.error == (
        "NoStepJobsError: t/eval@2026.01.01 declares a StepExecution (it runs as a step job) but this runner "
        "submits no jobs; run the experiment with --run from its main"
    )
    assert (records.read_status(evaluation.path(prefix)) or {})["state"] == records.FAILED


class CoordinatedStep(ArtifactStep[Directory]):
    """A step only the `@rl_build_options` coordinator may launch (as an RL step is)."""

    submitted_by = "@rl_build_options"


def test_a_step_only_a_coordinator_submits_is_built_by_that_coordinators_runner(prefix: str) -> None:
    coordinated = step(kind=CoordinatedStep)
    with pytest.raises(SubmissionPathError):
        Runner(prefix, report=lambda message: None).run([coordinated])
    (outcome,) = Runner(prefix, report=lambda message: None, submitter="@rl_build_options").run([coordinated])
    assert outcome.action == "built"


def test_a_config_value_without_a_canonical_form_is_named_before_a_step_job_is_asked(prefix: str) -> None:
    def with_nan(ctx: Any) -> dict[str, Any]:
        return {"output_path": ctx.output_path, "t": 1.0 if ctx.is_fingerprint else float("nan")}

    evaluation = step(StepExecution(runtime="trl-cpu"), build_config=with_nan)
    jobs = RecordingStepJobs({})
    with pytest.raises(RunFailedError) as failed:
        Runner(prefix, report=lambda message: None, step_jobs=jobs).run([evaluation])
    (outcome,) = failed.value.failed
    assert outcome.error == "CanonicalizationError: config.t: nan has no canonical JSON form; use a string or None"
    assert jobs.requests == []
