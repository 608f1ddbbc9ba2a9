"""Step jobs on the real local backend: the runner submits a step with a `StepExecution` as a job,
the task stages its inputs by identity and runs its function, and the runner records the artifact.
A failed or cancelled step job is recorded and classified, and relaunched only with `--retry`."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from rlaunch import storage
from rlaunch.artifacts import ArtifactStep, RunFailedError, Runner, records
from rlaunch.artifacts.runner import NoStepJobsError
from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.host.step_job import StepJobLauncher
from rlaunch.observe.collect import collect
from rlaunch.observe.render import status_text
from rlaunch.observe.resolve import resolve
from rlaunch.runs import run_record
from rlaunch.step_jobs import StepExecution
from tests.cluster import _step_functions as fns
from tests.support.polling import wait_for

REPO = str(Path(__file__).resolve().parents[2])
SMALL = StepExecution(cpu=1.0, memory="256MB", disk="1GB", time_limit_seconds=120)


@pytest.fixture
def prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("RLAUNCH_STAGING_ROOT", str(tmp_path / "staging"))
    monkeypatch.delenv("RLAUNCH_JOB_ID", raising=False)
    return str(tmp_path / "prefix")


def rows_step() -> ArtifactStep[fns.Rows]:
    return ArtifactStep(
        name="t/rows",
        version="2026.01.01",
        artifact_type=fns.Rows,
        run=fns.write_rows,
        build_config=lambda ctx: {"output_path": ctx.output_path},
    )


def count_step(rows: ArtifactStep[fns.Rows], execution: StepExecution | None = SMALL) -> ArtifactStep[fns.Rows]:
    return ArtifactStep(
        name="t/count",
        version="2026.01.01",
        artifact_type=fns.Rows,
        run=fns.count_rows,
        build_config=lambda ctx: {"output_path": ctx.output_path, "rows": f"{ctx.artifact_path(rows)}/rows.txt"},
        deps=(rows,),
        execution=execution,
    )


def step_of(run: Any, config: dict[str, Any], execution: StepExecution = SMALL) -> ArtifactStep[fns.Rows]:
    return ArtifactStep(
        name="t/job",
        version="2026.01.01",
        artifact_type=fns.Rows,
        run=run,
        build_config=lambda ctx: {"output_path": ctx.output_path, **config},
        execution=execution,
    )


def runner(prefix: str, backend: LocalBackend, lines: list[str], retry: dict[str, Any] | None = None) -> Runner:
    launcher = StepJobLauncher(retry=retry, working_dir=REPO, backend=backend)
    return Runner(prefix, report=lines.append, step_jobs=launcher, poll_seconds=0.05)


def attempts(path: str) -> list[dict[str, Any]]:
    return (run_record.read(path) or {}).get("attempts", [])


def step_jobs(backend: LocalBackend) -> list[Any]:
    return [j for j in backend.list_jobs() if j.labels.get("rlaunch.kind") == "step"]


def test_a_step_job_stages_its_input_runs_the_function_and_is_recorded_like_a_coordinator_step(
    prefix: str, backend: LocalBackend
) -> None:
    lines: list[str] = []
    count = count_step(rows_step())
    runner(prefix, backend, lines).run([count])
    path = count.path(prefix)
    record = records.read_record(path)
    assert records.is_succeeded(path) and record["result"]["rows"] == 3
    assert record["fingerprint"] == count.fingerprint and record["result_type"] == fns.Rows.type_name()
    # the function read a staged local copy, not the stored input
    assert "/staging/" in record["result"]["read_from"] and "/prefix/" not in record["result"]["read_from"]
    (job,) = step_jobs(backend)
    assert job.state.value == "succeeded" and job.labels["rlaunch.run"] == "t/count-2026.01.01"
    (attempt,) = attempts(path)
    assert attempt["state"] == "succeeded" and attempt["child_job_id"] == job.job_id and attempt["kind"] == "step"
    assert attempt["backend"] == "local" and attempt["resources"]["nodes"] == 1
    assert any(f"submitted step job {job.job_id}" in line for line in lines)
    assert fns.Rows.load(path).rows == 3  # a downstream step reads it as any artifact
    status = collect(resolve("t/count@2026.01.01", prefix))
    assert status.state == "succeeded" and status.kind == "step" and status.child.job_id == job.job_id
    text = status_text(status)
    assert "step job     1 node(s), each no accelerator, 1.0 CPU" in text and "checkpoints" not in text


def test_a_substituted_input_is_refused_in_the_step_job(prefix: str, backend: LocalBackend) -> None:
    rows = rows_step()
    lines: list[str] = []
    Runner(prefix, report=lines.append).run([rows])  # the input, built in this process
    count = count_step(rows)
    rows_path = rows.path(prefix)
    original = records.read_record(rows_path)

    class Substituting(StepJobLauncher):
        def run(self, request, report):  # another recipe's output lands at the input's path meanwhile
            records.write_record(rows_path, {**original, "fingerprint": "f" * 64})
            return super().run(request, report)

    sub = Runner(prefix, report=lines.append, step_jobs=Substituting(working_dir=REPO, backend=backend))
    with pytest.raises(RunFailedError):
        sub.run([count])
    (attempt,) = attempts(count.path(prefix))
    assert attempt["state"] == "failed" and attempt["failure_class"]["kind"]
    log = "".join(backend.logs(attempt["child_job_id"]))
    assert "t/rows@2026.01.01:ffffffffffff" in log and "the input changed since" in log
    assert not (Path(count.path(prefix)) / "count.txt").exists()  # the function never ran


def test_a_step_job_refused_its_own_storage_fails_as_read_only_storage_naming_the_path(
    prefix: str, backend: LocalBackend
) -> None:
    step = step_of(fns.denied_on_output, {})
    with pytest.raises(RunFailedError):
        runner(prefix, backend, []).run([step])
    (failed,) = attempts(step.path(prefix))
    cls = failed["failure_class"]  # the step's own output: the machinery's, as for an RL attempt
    assert (cls["kind"], cls["cause"]) == ("operational", "read-only storage"), cls
    assert cls["where"] == storage.local_path(storage.join(step.path(prefix), "rows.txt")), cls


def test_a_failed_step_job_is_classified_and_relaunched_only_with_retry(
    prefix: str, backend: LocalBackend, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    step = step_of(fns.fail_unless_marker, {"marker": str(marker)})
    path = step.path(prefix)
    lines: list[str] = []
    with pytest.raises(RunFailedError):
        runner(prefix, backend, lines).run([step])
    (failed,) = attempts(path)
    assert failed["state"] == "failed" and not failed.get("refused")
    assert failed["failure"].startswith(f"step job {failed['child_job_id']} reached failed")
    cls = failed["failure_class"]  # classified from the job's log, as an RL attempt's is
    assert (cls["kind"], cls["cause"]) == ("deterministic", "data-format error") and "KeyError: 'prompt'" in cls[
        "evidence"
    ]
    assert records.read_status(path)["state"] == records.FAILED

    marker.write_text("fixed")
    with pytest.raises(RunFailedError) as refused:
        runner(prefix, backend, lines).run([step])
    assert "--retry" in refused.value.failed[0].error
    assert len(attempts(path)) == 1 and len(step_jobs(backend)) == 1  # refused before anything was submitted

    retry = {"reason": "marker written", "by": {"user": "t"}, "at": "now"}
    runner(prefix, backend, lines, retry=retry).run([step])
    first, second = attempts(path)
    assert second["state"] == "succeeded" and second["retry"]["reason"] == "marker written"
    assert records.is_succeeded(path)


def test_a_cancelled_step_job_is_recorded_cancelled_and_needs_retry(
    prefix: str, backend: LocalBackend, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    step = step_of(fns.sleep_long, {"started": str(started)})
    lines: list[str] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            runner(prefix, backend, lines).run([step])
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    wait_for(started.exists, timeout=120)
    (job,) = step_jobs(backend)
    backend.cancel(job.job_id, reason="test cancels the step job")
    thread.join(timeout=60)
    assert not thread.is_alive() and isinstance(errors[0], RunFailedError)
    (attempt,) = attempts(step.path(prefix))
    assert attempt["state"] == "cancelled" and "cancelled" in attempt["failure"]
    with pytest.raises(RunFailedError) as refused:
        runner(prefix, backend, lines).run([step])
    assert "--retry" in refused.value.failed[0].error and "cancelled" in refused.value.failed[0].error


def test_a_step_job_too_large_for_the_machine_is_refused_before_submission(prefix: str, backend: LocalBackend) -> None:
    step = step_of(fns.write_rows, {}, StepExecution(cpu=64.0, memory="1GB", disk="1GB", time_limit_seconds=60))
    with pytest.raises(RunFailedError) as failed:
        runner(prefix, backend, []).run([step])
    assert "nothing was submitted" in failed.value.failed[0].error and step_jobs(backend) == []
    (attempt,) = attempts(step.path(prefix))
    assert attempt["refused"] is True  # a refusal is not an attempt the retry gate counts


def test_a_runner_without_a_job_path_refuses_a_step_job(prefix: str) -> None:
    step = step_of(fns.write_rows, {})
    with pytest.raises(RunFailedError) as failed:
        Runner(prefix, report=lambda _: None).run([step])
    assert NoStepJobsError.__name__ in failed.value.failed[0].error


def test_the_job_document_names_the_function_and_the_inputs_by_identity(prefix: str, backend: LocalBackend) -> None:
    count = count_step(rows_step())
    runner(prefix, backend, []).run([count])
    document = json.loads(Path(attempts(count.path(prefix))[0]["job_document_uri"]).read_text())
    assert document["function"] == "tests.cluster._step_functions:count_rows"
    assert document["inputs"] == [
        {"identity": f"t/rows@2026.01.01:{records.read_record(count.deps[0].path(prefix))['fingerprint']}",
         "uri": count.deps[0].path(prefix)}
    ]  # fmt: skip


def test_a_credential_in_a_step_jobs_config_is_refused_before_anything_is_written(
    prefix: str, backend: LocalBackend
) -> None:
    token = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
    step = step_of(fns.write_rows, {"hub": {"token": token}})
    with pytest.raises(RunFailedError) as failed:
        runner(prefix, backend, []).run([step])
    error = failed.value.failed[0].error
    assert "field config.hub.token carries a GitHub token" in error and token not in error
    assert step_jobs(backend) == [] and attempts(step.path(prefix)) == []
