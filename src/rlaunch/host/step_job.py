"""A step job on the coordinator's side: gate, job document, submit, follow, classify, record.

The same path as the RL step's child gang: the backend that runs the coordinator (`backend_from_env`;
outside any job, the local backend), the capacity check before anything is queued, one gang of
`nodes` replicas whose lifecycle the backend's gang driver keeps, logs followed into the
coordinator's, and every attempt in the step's run record (`runs.run_record`: state, jobs,
failure and its class), so `rlaunch status`, `rlaunch jobs`, `rlaunch logs` and `rlaunch cancel`
read it as they read an RL attempt. A step whose latest attempt failed or was cancelled is
relaunched only with an authorised retry (`--retry REASON`), as an RL step is.

The task (`rlaunch.task.step_entry`) stages the inputs by identity, runs the function and writes
its values; the runner records the artifact from them.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rlaunch import storage
from rlaunch.cluster.job_environment import job_environment
from rlaunch.cluster.protocol import (
    JOB_ID_ENV,
    Backend,
    JobSpec,
    JobState,
    JobStatus,
    Resources,
    backend_from_env,
    get_backend,
    single_replica_lines,
)
from rlaunch.errors import UserError
from rlaunch.experiment_code import code_uri, publish
from rlaunch.judgement.gates import recorded_attempts
from rlaunch.judgement.judge import Authorisations, judge_step_job
from rlaunch.launch_config.failures import classify
from rlaunch.names import sanitize_job_name
from rlaunch.runs.layout import STEP_JOB_DOCUMENT, STEP_JOB_RESULT, attempt_dir, step_job_attempts_root
from rlaunch.runs.run_record import update_attempt
from rlaunch.secrets import refuse_secrets_in
from rlaunch.step_jobs import StepExecution, StepJobRequest
from rlaunch.units import parse_size

TASK_MODULE = "rlaunch.task.step_entry"
LOG_TAIL = 200  # the lines a failure is classified by


class StepJobFailedError(UserError, RuntimeError):
    """A step job ended without success; the run record holds its failure and class."""


class StepJobRefusedError(UserError, RuntimeError):
    """A step job refused before anything was submitted (the retry gate, capacity)."""


def step_run_id(request: StepJobRequest) -> str:
    return f"{request.name}-{request.version}"


def execution_resources(execution: StepExecution) -> Resources:
    """Per-replica resources of a step job."""
    return Resources(
        cpu=float(execution.cpu),
        memory_bytes=parse_size(execution.memory),
        disk_bytes=parse_size(execution.disk),
        accelerators=execution.accelerators,
        accelerator_type=execution.accelerator_type,
    )


def step_job_spec(request: StepJobRequest, attempt_id: str, document_url: str, working_dir: str | None) -> JobSpec:
    """The gang a step job asks for: `nodes` replicas of the step task, the execution's resources."""
    execution = request.execution
    return JobSpec(
        name=sanitize_job_name(f"{request.name}-{request.version}-step"),
        argv=(sys.executable, "-m", TASK_MODULE, "--job", document_url),
        env=job_environment(),
        working_dir=working_dir,
        resources=execution_resources(request.execution),
        replicas=execution.nodes,
        timeout_seconds=float(execution.time_limit_seconds),
        max_retries=execution.max_retries,
        labels={"rlaunch.kind": "step", "rlaunch.run": step_run_id(request), "rlaunch.attempt": attempt_id},
    )


def gang_for_check(execution: StepExecution, name: str) -> JobSpec:
    """The gang a step job will ask for, for the capacity check before the coordinator is submitted."""
    return JobSpec(
        name=sanitize_job_name(f"{name}-step"),
        argv=(sys.executable,),
        resources=execution_resources(execution),
        replicas=execution.nodes,
    )


def job_document(request: StepJobRequest, attempt_id: str, result_url: str) -> dict[str, Any]:
    """What the task reads: the function by name, the config, the inputs by identity, and where the
    experiment's shipped code is (by its digest; none: the function comes from the working directory)."""
    code = request.code
    shipped = {} if code is None else {"code": {"uri": code_uri(request.prefix, code.digest), "digest": code.digest}}
    return {
        "identity": request.identity,
        "run_id": step_run_id(request),
        "attempt_id": attempt_id,
        "function": request.function,
        "config": dict(request.config),
        "inputs": [{"identity": i.identity, "uri": i.uri} for i in request.inputs],
        "runtime": request.execution.runtime,
        "result_uri": result_url,
        **shipped,
    }


def retry_refusal(identity: str, output_path: str) -> str | None:
    """Why relaunching this step needs `--retry` (None: its latest attempt did not fail), in the words
    of the judgement `--run` and the dry run print (`rlaunch.judgement.judge.judge_step_job`)."""
    found = judge_step_job(identity, recorded_attempts(output_path), Authorisations())
    return "\n".join(f"{identity}: {f.line()}" for f in found) or None


@dataclass
class StepJobLauncher:
    """The `StepJobs` of a coordinator. `retry`: the `--retry` authorisation (reason, by, at) it carries;
    `placement`: the coordinator's backend options (the RL step's), recorded so `rlaunch status` finds the jobs."""

    retry: Mapping[str, Any] | None = None
    working_dir: str | None = None
    backend: Backend | None = None  # None: the backend that runs this process, else the local backend
    placement: Mapping[str, Any] = field(default_factory=dict)  # recorded: how a reader reaches the backend

    def run(self, request: StepJobRequest, report: Callable[[str], None]) -> dict[str, Any]:
        refusal = retry_refusal(request.identity, request.output_path)
        if refusal and self.retry is None:
            raise StepJobRefusedError(refusal)
        attempt_id = uuid.uuid4().hex[:12]
        directory = attempt_dir(step_job_attempts_root(request.prefix, request.name, request.version), attempt_id)
        document_url = storage.join(directory, STEP_JOB_DOCUMENT)
        result_url = storage.join(directory, STEP_JOB_RESULT)
        document = job_document(request, attempt_id, result_url)
        refuse_secrets_in(document, f"the step job document of {request.identity}")  # stored: no credentials
        if request.code is not None:  # the files fingerprinted, stored by their digest before the job reads them
            publish(request.code, document["code"]["uri"], document["code"]["digest"])
        storage.write_json_atomic(document_url, document)
        backend = self.backend or backend_from_env() or get_backend("local")
        spec = step_job_spec(request, attempt_id, document_url, self.working_dir or os.getcwd())
        parent = os.environ.get(JOB_ID_ENV)
        record = _Record(request, attempt_id, backend, dict(self.placement))
        record.update({
            "state": "launching",
            "artifact": request.identity,
            "fingerprint": request.fingerprint,
            "kind": "step",
            "runtime_profile": request.execution.runtime,
            "resources": {**execution_resources(request.execution).__dict__, "nodes": request.execution.nodes},
            "attempt_dir": directory,
            "job_document_uri": document_url,
            "argv": list(spec.argv),
            "submitted_at": storage.utc_now(),
            **({"retry": dict(self.retry)} if refusal and self.retry is not None else {}),
        })  # fmt: skip
        try:
            backend.check(spec, parent=parent)
            job_id = backend.submit_child(spec) if parent else backend.submit(spec)
        except Exception as exc:
            failure = f"{type(exc).__name__}: {exc}; nothing was submitted"
            record.update({"state": "failed", "refused": True, "failure": failure, "finished_at": storage.utc_now()})
            raise StepJobRefusedError(f"{request.identity}: {failure}") from exc
        report(f"  submitted step job {job_id} for {request.identity} via {backend.name}")
        record.update({"state": "running", "child_job_id": job_id})
        tail: deque[str] = deque(maxlen=LOG_TAIL)  # per job: several step jobs may run at once
        status = _follow(backend, job_id, spec.replicas, request.identity, record, report, tail)
        if status.state is not JobState.SUCCEEDED:
            failure = f"step job {job_id} reached {status.state.value}" + (
                f": {status.message}" if status.message else ""
            )
            codes = [r.exit_code for r in status.replicas]
            state = "cancelled" if status.state is JobState.CANCELLED else "failed"
            record.update({
                "state": state,
                "failure": failure,
                "failure_class": classify(failure, list(tail), codes, storage_roots=_local_roots(request, directory)).to_json(),
                "finished_at": storage.utc_now(),
            })  # fmt: skip
            raise StepJobFailedError(f"{request.identity}: {failure}")
        values = storage.read_json(result_url)
        if not isinstance(values, dict):
            failure = f"step job {job_id} succeeded but left no result at {result_url}"
            record.update({"state": "failed", "failure": failure, "finished_at": storage.utc_now()})
            raise StepJobFailedError(f"{request.identity}: {failure}")
        record.update({"state": "succeeded", "finished_at": storage.utc_now()})
        return dict(values.get("values") or {})


def _follow(
    backend: Backend,
    job_id: str,
    replicas: int,
    identity: str,
    record: _Record,
    report: Callable[[str], None],
    tail: deque[str],
) -> JobStatus:
    """Stream the job's logs into the coordinator's (keeping a tail) and wait; if the coordinator
    stops following (interrupted, or an error), the job is cancelled and recorded so."""
    try:
        for line in single_replica_lines(backend.logs(job_id, follow=True), replicas):
            report(f"  [{identity}] {line.rstrip()}")
            tail.append(line)
        return backend.wait(job_id)
    except BaseException:
        with contextlib.suppress(Exception):  # never leave a job nobody follows
            backend.cancel(job_id, reason="the coordinator stopped following its step job")
        with contextlib.suppress(Exception):
            record.update({
                "state": "cancelled",
                "failure": "the coordinator was interrupted; the step job was cancelled",
                "finished_at": storage.utc_now(),
            })  # fmt: skip
        raise


@dataclass
class _Record:
    """The step job's attempt entry in the step's run record, with where its jobs are."""

    request: StepJobRequest
    attempt_id: str
    backend: Backend
    placement: dict[str, Any]

    def update(self, fields: dict[str, Any]) -> None:
        update_attempt(self.request.output_path, step_run_id(self.request), self.attempt_id, {
            "coordinator_job_id": os.environ.get(JOB_ID_ENV),
            "backend": self.backend.name,
            "placement": self.placement,
            "backend_settings": self.backend.environment(),
            **fields,
        })  # fmt: skip


def _local_roots(request: StepJobRequest, directory: str) -> list[str]:
    """The step job's storage as local paths (its output and its attempt's directory): where a
    permission error is read-only storage, as for an RL attempt."""
    return [storage.local_path(url) for url in (request.output_path, directory) if storage.is_local(url)]
