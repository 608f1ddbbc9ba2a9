"""The host lifecycle: document in, one result out.

load -> refuse if the terminal manifest exists -> plan it once (`PlannedLaunch`: profile, composed
recipe, geometry, memory table; validation, composition, the judgement and the run record's memory
table all read it) -> validate (every rule the preflight applies) -> compose -> refuse output roots holding files rlaunch did not write -> the judgement (every gate, a foreign resume among them) -> write the resolved document -> submit the child gang
(prepare: build it only; detach: submit and return; wait: supervise, streaming its logs) ->
export -> manifests and run record.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections import deque
from typing import Any, TextIO

from rlaunch import storage
from rlaunch.boundary import classify as classify_error
from rlaunch.cluster.protocol import JOB_ID_ENV, Backend, JobState, backend_from_env, get_backend, single_replica_lines
from rlaunch.errors import UserError
from rlaunch.host.allocate import child_job_spec, driver_job_spec, drives_existing_cluster
from rlaunch.host.compose import compose_document
from rlaunch.host.export import ExportError, terminal_export
from rlaunch.host.manifests import FAILED, PREPARED, SUBMITTED, SUCCEEDED, LaunchResult, write_manifests
from rlaunch.host.outputs import ForeignOutputError, refuse_foreign_outputs
from rlaunch.host.validate import DocumentRefused, planned_launch, validate_planned
from rlaunch.judgement.gates import authorisations
from rlaunch.judgement.judge import Authorisations, judge, refusals
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config import schema
from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.failures import DISK_FULL, UNCLASSIFIED, FailureClass, classify, disk_full, told
from rlaunch.launch_config.recipe_keys import TRAINER
from rlaunch.launch_config.typed import DocumentError
from rlaunch.rules.document_subject import memory_table
from rlaunch.rules.memory import MemoryTable
from rlaunch.runs.layout import GANG_OUTCOME, RESOLVED_DOCUMENT, WANDB_RUN, attempt_dir
from rlaunch.runs.rehearsal_report import REHEARSED, read_report, render
from rlaunch.runs.resume import fall_back, verified_resume
from rlaunch.runs.run_record import keep_field, task_phases, update_attempt
from rlaunch.runs.sweep import RECORD_KEY
from rlaunch.runtimes.registry import get_profile
from rlaunch.secrets import refuse_secrets_in
from rlaunch.statefiles import CorruptStateError
from rlaunch.storage import utc_now

LOG_TAIL = 200


def host_backend(doc: schema.SkyRLLaunchConfig) -> Backend:
    """Inside a job, the backend that runs it (the child becomes its child); else the document's."""
    ambient = backend_from_env()
    if ambient is not None and ambient.name == doc.cluster.backend:
        return ambient
    try:
        return get_backend(doc.cluster.backend, **dict(doc.cluster.placement))
    except TypeError as exc:
        raise DocumentError(
            [
                f"cluster.placement={dict(doc.cluster.placement)!r} is not accepted by the {doc.cluster.backend} "
                f"backend ({exc}); remove the keys it does not know"
            ]  # fmt: skip
        ) from None


def execute_launch(url: str, log: TextIO = sys.stderr) -> LaunchResult:
    doc = schema.load(url)
    result = LaunchResult(
        run_id=doc.run.id,
        attempt_id=doc.run.attempt_id,
        state=FAILED,
        backend=doc.cluster.backend,
        runtime_profile=doc.runtime.profile,
        runtime_digest=doc.runtime.source_digest,
        coordinator_job_id=os.environ.get(JOB_ID_ENV),
    )
    if storage.exists(doc.artifacts.terminal_manifest_uri):
        result.failure = f"terminal manifest is immutable and already exists: {doc.artifacts.terminal_manifest_uri}"
        return result
    resolved_doc, planned = doc, None
    try:
        planned = planned_launch(doc)
        validate_planned(planned)
        resolved_doc = compose_document(doc, planned.composed)
        refuse_foreign_outputs(resolved_doc)  # before anything is written: no manifest into a foreign root
        refuse_secrets_in(resolved_doc.to_dict(), f"launch document {url}")  # stored and recorded: no credentials
        _check_gates(planned)
        _verify_resume(resolved_doc, result, log)
        return _submit(resolved_doc, result, log, planned.memory)
    except ForeignOutputError as exc:
        result.failure = str(exc)
        raise LaunchRefusedError(str(exc), result) from exc
    except UserError as exc:
        result.failure = str(exc)
        result.violations = exc.to_json() if isinstance(exc, DocumentRefused) else []
        codes = [v["code"] for v in result.violations if v.get("code")]
        result.failure_class = classify(result.failure, refused=True, rule_codes=codes).to_json()
        with contextlib.suppress(OSError):  # unwritable storage: the refusal still reaches stdout
            _finish(resolved_doc, result, _memory(doc, planned), refused=True)
        raise LaunchRefusedError(str(exc), result) from exc
    except Exception as exc:  # noqa: BLE001 - a failed launch still leaves its manifest and record
        _, result.failure = classify_error(exc, "rlaunch launch")
        result.failure_class = classify(result.failure, storage_roots=_local_roots(resolved_doc)).to_json()
        with contextlib.suppress(OSError):
            _finish(resolved_doc, result, _memory(doc, planned))
        return result


def _memory(doc: schema.SkyRLLaunchConfig, planned: PlannedLaunch | None) -> MemoryTable:
    """The memory table the run record keeps: the planned launch's (None: the document's runtime is
    unknown, so nothing composed; the table says why it is unsized)."""
    return planned.memory if planned is not None else memory_table(doc)


class ResumeRefusedError(UserError, RuntimeError):
    pass


class LaunchRefusedError(UserError):
    """The document or environment was refused; `result` is the failed result already recorded."""

    def __init__(self, message: str, result: LaunchResult):
        super().__init__(message)
        self.result = result


class HostInterrupted(BaseException):
    """SIGTERM reached the host (its coordinator was cancelled): stop the child, record, exit."""


def _verify_resume(doc: schema.SkyRLLaunchConfig, result: LaunchResult, log: TextIO) -> None:
    """Resume only a checkpoint whose files match its manifest: a damaged latest one is moved aside
    and the newest that verifies is resumed, saying so; with none good the launch is refused."""
    if get_path(doc.skyrl, TRAINER.RESUME_MODE) != "latest":
        return
    root = doc.artifacts.checkpoint_root
    point = verified_resume(root)
    if point is None:
        return
    if point.info is None:
        raise ResumeRefusedError(
            f"resume_mode=latest: no checkpoint under {root} matches its manifest: {'; '.join(point.notes())}. "
            "Move the damaged checkpoints away to start this version from step 0, or use a fresh RL artifact version"
        )
    if point.skipped:
        fall_back(root, point)
        log.write(
            f"resuming step {point.info.step} ({point.info.path}): the newer checkpoints fail their manifest and "
            f"were moved aside: {'; '.join(point.notes())}\n"
        )
    else:
        log.write(f"resuming step {point.info.step} ({point.info.path}): no file of it fails its manifest\n")
    result.resume = {"step": point.info.step, "path": point.info.path, "skipped": point.notes()}


class GateRefusedError(UserError):
    """The judgement (`rlaunch.judgement.judge`) refuses the document: version, retry, smoke, large,
    calendar version, a needed credential unset, a checkpoint it may not resume, or memory."""


def _check_gates(planned: PlannedLaunch) -> None:
    """The judgement `--run` applies, applied again to the document the host was handed (`rlaunch
    launch --config`; the planned launch `--run` judged is that document), over the evidence
    `rlaunch verify-smoke` reads."""
    from rlaunch.observe.launch_evidence import launch_evidence

    doc = planned.document
    found = refusals(judge(planned, launch_evidence(planned), Authorisations.of(doc.gates)))
    if found:
        raise GateRefusedError("\n".join(found))


def _submit(doc: schema.SkyRLLaunchConfig, result: LaunchResult, log: TextIO, memory: MemoryTable) -> LaunchResult:
    resolved_url = storage.join(attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id), RESOLVED_DOCUMENT)
    problem = storage.writable_problem(doc.artifacts.output_path)
    if problem:
        raise storage.StorageError(f"artifacts.output_path: {problem}; nothing was submitted")
    storage.write_text_atomic(resolved_url, schema.dumps(doc))
    result.resolved_config_uri = resolved_url
    gang = child_job_spec(doc, resolved_url, working_dir=os.getcwd())
    spec = driver_job_spec(gang) if drives_existing_cluster(doc) else gang
    backend = host_backend(doc)
    if doc.run.submission == "prepare":
        log.write(f"prepared child job {spec.name}: {spec.replicas} replica(s), {spec.resources}\n")
        result.state = PREPARED
        return result
    if spec is not gang:  # the driver runs inside the cluster; the whole gang must still fit in it
        backend.check(gang, parent=os.environ.get(JOB_ID_ENV))
    # stamped as the submission starts: a fast replica can join before submit() returns
    submitted = {"host_started": result.started_at, "child_submitted": utc_now()}
    result.child_job_id = backend.submit_child(spec) if os.environ.get(JOB_ID_ENV) else backend.submit(spec)
    log.write(f"submitted child job {result.child_job_id} ({spec.replicas} replica(s)) via {backend.name}\n")
    log.flush()
    phases = {**submitted, **_coordinator_phases(backend, result.coordinator_job_id)}
    _record(doc, result, "running", backend, memory, phases)
    if doc.run.submission == "detach":
        result.state = SUBMITTED
        return result
    tail: deque[str] = deque(maxlen=LOG_TAIL)  # the lines a failure is classified by
    try:
        for line in single_replica_lines(backend.logs(result.child_job_id, follow=True), spec.replicas):
            log.write(line if line.endswith("\n") else line + "\n")
            log.flush()
            tail.append(line)
        status = backend.wait(result.child_job_id)
    except (KeyboardInterrupt, HostInterrupted):
        backend.cancel(result.child_job_id, reason="launch host interrupted")
        result.child_job_state = JobState.CANCELLED.value
        result.failure = f"the launch host was interrupted; child job {result.child_job_id} was cancelled"
        _finish(doc, result, memory, backend)
        raise
    except Exception:
        # The host cannot follow its child any more: stop it rather than leave it unsupervised.
        with contextlib.suppress(Exception):
            backend.cancel(result.child_job_id, reason="launch host failed while supervising it")
        raise
    result.child_job_state = status.state.value
    if status.state is not JobState.SUCCEEDED:
        result.failure = f"child job {result.child_job_id} reached {status.state.value}" + (
            f": {status.message}" if status.message else ""
        )
    elif not _rehearsed(doc, result, log):
        _succeed(doc, result)
    if result.state == FAILED:
        codes = [_trainer_exit_code(doc), *(r.exit_code for r in status.replicas)]
        found = classify(result.failure, list(tail), codes, storage_roots=_local_roots(doc))
        if found.cause == DISK_FULL and found.where is None:  # a trainer's ENOSPC names no file: its fullest root
            found = dataclasses.replace(found, where=storage.fullest(_run_roots(doc)))
        if found.cause == DISK_FULL and found.where and found.where not in (result.failure or ""):
            result.failure = f"{result.failure}; {told(found)}"  # the text and the class name one path
        result.failure_class = found.to_json()
    _finish(doc, result, memory, backend)
    return result


def _evidence(doc: schema.SkyRLLaunchConfig, name: str) -> Any:
    """A file the gang left in the attempt directory (None: absent or damaged, a report only)."""
    try:
        return storage.read_json(storage.join(attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id), name))
    except CorruptStateError:
        return None


def _trainer_exit_code(doc: schema.SkyRLLaunchConfig) -> int | None:
    """Rank 0's runtime exit code (negative: the signal that ended it), from the gang's outcome."""
    code = (_evidence(doc, GANG_OUTCOME) or {}).get("exit_code")
    return code if isinstance(code, int) else None


def _rehearsed(doc: schema.SkyRLLaunchConfig, result: LaunchResult, log: TextIO) -> bool:
    """A rehearsal runtime's gang that ended with its report: recorded `rehearsed`, nothing exported."""
    if not get_profile(doc.runtime.profile).rehearsal:
        return False
    report = read_report(doc.artifacts.attempts_root, doc.run.attempt_id)
    if report is None:
        return False
    result.state, result.rehearsal = REHEARSED, report.to_json()
    log.write(render(report) + "\n")
    return True


def _succeed(doc: schema.SkyRLLaunchConfig, result: LaunchResult) -> None:
    if doc.run.export_hf:
        try:
            exported = terminal_export(doc)
        except ExportError as exc:
            result.failure = f"terminal export failed: {exc}"
            return
        result.model = exported.__dict__.copy()
    storage.write_text_atomic(doc.artifacts.resolved_config_uri, schema.dumps(doc))
    result.state = SUCCEEDED


def _finish(
    doc: schema.SkyRLLaunchConfig,
    result: LaunchResult,
    memory: MemoryTable,
    backend: Backend | None = None,
    *,
    refused: bool = False,
) -> None:
    """Write the manifests and the attempt's end; a refused attempt (nothing was submitted) says so,
    and the gates do not count it as a run of this version."""
    result.finished_at = utc_now()
    try:
        write_manifests(doc, doc.to_dict(), result)
    except OSError as exc:
        if not storage.is_disk_full(exc):
            raise
        _manifests_did_not_fit(result, exc)  # the run record (often on another volume) still tells
    phases = {"finished": result.finished_at}
    extra: dict[str, Any] = {"refused": True} if refused else {}
    if result.child_job_id:
        phases.update(task_phases(doc.artifacts.attempts_root, doc.run.attempt_id))
        wandb = _evidence(doc, WANDB_RUN)
        if isinstance(wandb, dict):
            extra["wandb"] = wandb  # the run the trainer actually logged to
    _record(doc, result, result.state, backend, memory, phases, extra)


def _run_roots(doc: schema.SkyRLLaunchConfig) -> list[str]:
    paths = doc.artifacts
    return [paths.checkpoint_root, paths.attempts_root, paths.export_root, paths.output_path]


def _local_roots(doc: schema.SkyRLLaunchConfig) -> list[str]:
    """The run's storage roots as local paths: where a permission error is read-only storage."""
    return [storage.local_path(url) for url in _run_roots(doc) if url and storage.is_local(url)]


def _manifests_did_not_fit(result: LaunchResult, exc: OSError) -> None:
    """The attempt's manifests hit a full disk: the attempt failed (a success without its terminal
    manifest is not complete), and says so; a cause the trainer's failure already named stays, and
    a full disk it named stays the path told (the write that did not fit first)."""
    result.state = FAILED
    recorded = FailureClass.from_json(result.failure_class)
    if recorded and recorded.cause == DISK_FULL and recorded.where:
        result.failure = f"{result.failure}; the attempt's manifests did not fit either"
        return
    message = storage.disk_full_message(exc)
    result.failure = f"{result.failure}; {message}" if result.failure else message
    if recorded is None or recorded.kind == UNCLASSIFIED:
        result.failure_class = disk_full(message, exc.filename).to_json()
    elif recorded.cause == DISK_FULL:  # the trainer's full disk named no file: this write names it
        result.failure_class = dataclasses.replace(recorded, where=exc.filename).to_json()


def _coordinator_phases(backend: Backend, job_id: str | None) -> dict[str, str]:
    """When the coordinator job was submitted and started, as its backend recorded them."""
    if not job_id:
        return {}
    try:
        status = backend.status(job_id)
    except Exception:  # noqa: BLE001 - timings are a report, never a reason to fail a launch
        return {}
    started = status.replicas[0].started_at if status.replicas else status.started_at
    return {k: v for k, v in (("submitted", status.submitted_at), ("coordinator_started", started)) if v}


def _record(
    doc: schema.SkyRLLaunchConfig,
    result: LaunchResult,
    state: str,
    backend: Backend | None,
    memory: MemoryTable,
    phases: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """The attempt's run-record entry; `backend_settings` say where its jobs can be found again."""
    alloc = doc.cluster.allocation
    if doc.run.sweep is not None:  # what `rlaunch runs` groups by: the run's, beside its attempts
        keep_field(doc.artifacts.output_path, doc.run.id, RECORD_KEY, dict(doc.run.sweep))
    update_attempt(doc.artifacts.output_path, doc.run.id, doc.run.attempt_id, {
        "state": state,
        "coordinator_job_id": result.coordinator_job_id,
        "child_job_id": result.child_job_id,
        "backend": doc.cluster.backend,
        "placement": dict(doc.cluster.placement),
        "backend_settings": backend.environment() if backend is not None else {},
        "runtime_profile": doc.runtime.profile,
        "runtime_digest": doc.runtime.source_digest,
        "allocation": alloc.__dict__.copy(),
        "host_started_at": result.started_at,
        "finished_at": result.finished_at,
        "failure": result.failure,
        "resolved_config_uri": result.resolved_config_uri,
        "recipe_overrides": dict(doc.run.recipe_overrides),
        **authorisations(doc.gates),
        **({"failure_class": result.failure_class} if result.failure_class else {}),
        **({"resume": result.resume} if result.resume else {}),
        **(extra or {}),
        "phases": phases or {},
        "memory": memory.as_dict(),
    })  # fmt: skip
