"""Everything about one attempt of an RL run, read into a typed `RunStatus` snapshot.

Pure reads: the run record, the launch document the host resolved, the job states (through the
backend), the join markers, the trainer's model-load record and metrics, the checkpoints, the
export and the terminal manifest. Nothing here writes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import records as artifact_records
from rlaunch.cluster.protocol import Backend
from rlaunch.dotted import get_path
from rlaunch.launch_config import schema
from rlaunch.launch_config.failures import DISK_FULL, UNCLASSIFIED, FailureClass, classify
from rlaunch.launch_config.recipe_keys import ROLE, TRAINER, role_key
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.observe import run_jobs
from rlaunch.observe.pace import pace
from rlaunch.observe.resolve import RunRef
from rlaunch.observe.run_files import list_names, read_document, read_json, read_metrics, read_text
from rlaunch.observe.run_status import (  # the snapshot's types, read here
    TERMINAL_STATES,
    WEIGHT_SUFFIXES,
    Authorised,
    Cancellation,
    Checkpoints,
    Export,
    Joined,
    ModelLoad,
    RunStatus,
    Steps,
    Tasks,
    Terminal,
)
from rlaunch.observe.scores import read_score
from rlaunch.runs.layout import (
    CHECKPOINT_META,
    JOINED,
    LATEST_MARKER,
    METRICS,
    MODEL_LOAD,
    WANDB_RUN,
    attempt_dir,
    attempt_manifest,
    cancel_record,
    checkpoint_dir,
    checkpoint_steps,
    export_policy_dir,
    export_root,
    terminal_manifest,
)
from rlaunch.runs.run_record import first_step_phase, marker_phases

MAX_MARKER_READS = 256  # bounded reads: a huge gang's markers beyond this are counted by name only
_REPLICA_MARKER = re.compile(r"^replica-(\d+)\.json$")
_TRAINER_MARKER = re.compile(r"^trainer-rank-(\d+)\.json$")
WANDB_SITE = "https://wandb.ai"  # a run's page when its evidence names no URL (a self-hosted server records its own)
OFFLINE_WANDB_MODES = ("offline", "dryrun")


def iso_time(value: Any) -> str | None:
    """ISO-8601 for either form a marker carries: an ISO string or epoch seconds."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return storage.utc_from_epoch(float(value))
    return str(value)


# -- the pieces --------------------------------------------------------------------------------


def launch_document(attempt: dict[str, Any], output_path: str) -> tuple[SkyRLLaunchConfig | None, str | None]:
    """The attempt's launch document: resolved by the host if it got that far, else as handed over."""
    for key in ("resolved_config_uri", "launch_document_uri"):
        url = attempt.get(key)
        if url:
            doc = read_document(url)
            if doc is not None:
                return doc, url
    record = artifact_records.read_record(output_path) if storage.exists(output_path) else None
    return schema.from_dict_tolerant(get_path(record or {}, "config.launch_document", None)), None


def _expected_trainers(profile_name: str | None, gpus_per_node: int | None) -> tuple[int | None, str | None]:
    """Trainer processes the task bootstrap starts (the runtime profile says), and its launcher."""
    if not profile_name:
        return None, None
    from rlaunch.runtimes.registry import UnknownRuntimeError, get_profile

    try:
        profile = get_profile(profile_name)
    except (UnknownRuntimeError, ImportError, OSError, KeyError):
        return None, None
    return profile.trainer_processes(gpus_per_node or 1), profile.launcher


def _markers(directory: str) -> tuple[list[Joined], list[Joined]]:
    """Join markers; past MAX_MARKER_READS only their names are used (rank, no host or time)."""
    replicas: list[Joined] = []
    trainers: list[Joined] = []
    reads = 0
    for name in list_names(directory):
        for pattern, into in ((_REPLICA_MARKER, replicas), (_TRAINER_MARKER, trainers)):
            match = pattern.match(name)
            if match:
                reads += 1
                marker = (read_json(storage.join(directory, name)) or {}) if reads <= MAX_MARKER_READS else {}
                world = marker.get("world_size")
                into.append(
                    Joined(
                        int(match.group(1)),
                        marker.get("host"),
                        iso_time(marker.get("time")),
                        marker.get("pid"),
                        int(world) if isinstance(world, int) else None,
                    )
                )
    return sorted(replicas, key=lambda j: j.rank), sorted(trainers, key=lambda j: j.rank)


def _tasks(doc: SkyRLLaunchConfig | None, directory: str | None, profile: str | None) -> Tasks:
    alloc = doc.cluster.allocation if doc else None
    expected, launcher = _expected_trainers(profile, alloc.gpus_per_node if alloc else None)
    replicas, trainers = _markers(storage.join(directory, JOINED)) if directory else ([], [])
    if expected is None and trainers:
        expected = max(t.world_size or 1 for t in trainers)  # the profile is unknown here: trust the markers
    return Tasks(
        expected_replicas=alloc.num_nodes if alloc else None,
        replicas=replicas,
        expected_trainer_processes=expected,
        trainer_launcher=launcher,
        trainers=trainers,
    )


def _model(doc: SkyRLLaunchConfig | None, directory: str | None) -> ModelLoad:
    model = ModelLoad()
    if doc is not None:
        model.input_uri, model.expected_identity = doc.inputs.model.uri, doc.inputs.model.identity
        model.configured = get_path(doc.skyrl, role_key("policy", ROLE.MODEL_PATH), None) or doc.inputs.model.local_path
    record = read_json(storage.join(directory, MODEL_LOAD)) if directory else None
    if not isinstance(record, dict):
        return model
    model.recorded = True
    model.configured_path = record.get("configured_path")
    model.loaded_path = record.get("loaded_path")
    model.identity = record.get("identity")
    model.weights_sha256 = record.get("weights_sha256")
    model.weight_files = dict(record.get("weight_files") or {})
    model.resumed_from_step = record.get("resumed_from_step")
    model.architecture = record.get("architecture")
    model.num_parameters = record.get("num_parameters")
    if (model.weight_files or model.weights_sha256) and model.input_uri:
        files = get_path(artifact_records.find_record(model.input_uri) or {}, "result.files", None) or {}
        model.expected_weight_files = {k: v for k, v in files.items() if str(k).endswith(WEIGHT_SUFFIXES)}
    return model


def final_step(doc: SkyRLLaunchConfig | None) -> int | None:
    """The training step the document's run ends at (`trainer.max_training_steps`), when it says."""
    final = get_path(doc.skyrl, TRAINER.MAX_TRAINING_STEPS, None) if doc else None
    return int(final) if isinstance(final, (int, float)) else None


def _steps(doc: SkyRLLaunchConfig | None, directory: str | None) -> Steps:
    last = final_step(doc)
    steps = Steps(final_step=last, pace=pace([], last))  # no step logged yet: the rate waits
    if not directory:
        return steps
    steps.url = storage.join(directory, METRICS)
    log = read_metrics(steps.url)
    records = log.records
    steps.complete = log.complete
    if not records:
        return steps
    numbers = log.steps
    steps.count = len(records)
    steps.first_step, steps.latest_step = numbers[0], numbers[-1]
    steps.increasing = all(b > a for a, b in zip(numbers, numbers[1:]))
    steps.last = records[-1]
    training = records[-1].get("training_step")
    steps.latest_training_step = int(training) if isinstance(training, (int, float)) else numbers[-1]
    t0, t1 = records[0].get("time"), records[-1].get("time")
    steps.first_time = float(t0) if isinstance(t0, (int, float)) else None
    if isinstance(t0, (int, float)) and isinstance(t1, (int, float)) and t1 > t0 and len(records) > 1:
        steps.steps_per_minute = (numbers[-1] - numbers[0]) / (t1 - t0) * 60.0
    steps.pace = pace([point for record in records if (point := _timed_step(record))], steps.final_step)
    return steps


def _timed_step(record: dict[str, Any]) -> tuple[int, float] | None:
    """(training step, logged time) of a metrics line; None when it carries no time."""
    at, training = record.get("time"), record.get("training_step")
    if not isinstance(at, (int, float)):
        return None
    return (int(training) if isinstance(training, (int, float)) else record["step"]), float(at)


def _checkpoints(doc: SkyRLLaunchConfig | None) -> Checkpoints:
    root = doc.artifacts.checkpoint_root if doc else None
    ckpt = Checkpoints(root=root)
    if not root:
        return ckpt
    try:
        found = checkpoint_steps(root)
    except (OSError, ValueError):
        found = []
    for step in found:  # the manifest is written last: without it the weights may be partial (a full disk)
        complete = storage.exists(storage.join(checkpoint_dir(root, step), CHECKPOINT_META))
        (ckpt.steps if complete else ckpt.incomplete).append(step)
    marker = read_text(storage.join(root, LATEST_MARKER))
    if marker is None:
        return ckpt
    try:
        ckpt.latest_step = int(marker.strip())
    except ValueError:
        ckpt.marker_error = f"{storage.join(root, LATEST_MARKER)} holds {marker.strip()[:40]!r}, not a step number"
        return ckpt
    ckpt.latest_path = checkpoint_dir(root, ckpt.latest_step)
    meta = read_json(storage.join(ckpt.latest_path, CHECKPOINT_META))
    ckpt.latest_meta = meta if isinstance(meta, dict) else None
    return ckpt


def _terminal(doc: SkyRLLaunchConfig | None, output_path: str) -> Terminal:
    uri = doc.artifacts.terminal_manifest_uri if doc else terminal_manifest(output_path)
    manifest = read_json(uri)
    if not isinstance(manifest, dict):
        return Terminal(uri=uri)
    result = manifest.get("result") or {}
    return Terminal(
        uri=uri,
        exists=True,
        state=result.get("state"),
        attempt_id=result.get("attempt_id"),
        global_step=get_path(result, "model.global_step", None),
        failure=result.get("failure"),
    )


def _export(doc: SkyRLLaunchConfig | None, terminal: Terminal, ckpt: Checkpoints, output_path: str) -> Export:
    export = Export(wanted=bool(doc and doc.run.export_hf))
    if terminal.exists:
        manifest = read_json(terminal.uri or "") or {}
        export.uri = get_path(manifest, "result.model.policy_export_uri", None)
    if export.uri:
        export.files = list_names(export.uri)
    elif ckpt.latest_step is not None:  # before the host finished: the trainer's export, if it wrote one
        root = doc.artifacts.export_root if doc else export_root(output_path)
        guess = export_policy_dir(root, ckpt.latest_step)
        export.files = list_names(guess)
        export.uri = guess if export.files else None
    return export


def _cancellation(attempt: dict[str, Any], output_path: str, attempt_id: str | None) -> Cancellation | None:
    record = read_json(cancel_record(output_path, attempt_id)) if attempt_id else None
    record = record if isinstance(record, dict) else attempt.get("cancelled")
    if not isinstance(record, dict):
        return None
    return Cancellation(by=who(record.get("by")), at=record.get("at"), reason=record.get("reason"))


def who(by: Any) -> str:
    """`user@host` of a recorded actor (`rlaunch.processes.actor`)."""
    by = by or {}
    if isinstance(by, dict) and "declared" in by:  # a waiver the step declares in code
        return f"declared in {by['declared']}"
    return f"{by.get('user', '?')}@{by.get('host', '?')}" if isinstance(by, dict) else str(by)


def _authorised(entry: Any) -> Authorised | None:
    if not isinstance(entry, dict):
        return None
    return Authorised(by=who(entry.get("by")), at=entry.get("at"), reason=entry.get("reason"))


def effective_state(
    record_state: str | None,
    coordinator: run_jobs.JobView | None,
    child: run_jobs.JobView | None,
    terminal: Terminal,
    cancelled: Cancellation | None,
    attempt_id: str | None,
) -> tuple[str, str | None]:
    """The run's state: what the record says, corrected by the jobs when the record was never finalised.

    A succeeded terminal manifest makes the attempt succeeded only when it names that attempt: one that
    names none (the host always writes it) is no attempt's, even an attempt the record lost the id of."""
    if terminal.exists and terminal.state == "succeeded" and attempt_id and terminal.attempt_id == attempt_id:
        return "succeeded", None
    top = next((j for j in (coordinator, child) if j is not None and j.error is None), None)
    if record_state == "failed" and (cancelled is not None or (top is not None and top.state == "cancelled")):
        return "cancelled", "cancelled while running; the run record says failed"  # the host records the interruption
    if record_state in TERMINAL_STATES:
        return record_state, None
    if record_state is None:
        return "pending", "no attempt recorded yet: the coordinator has not reached the RL step"
    known = [j for j in (coordinator, child) if j is not None and j.error is None]
    if not known:
        return record_state, None if record_state != "launching" else "waiting for the launch host"
    if not all(j.terminal for j in known):
        return ("running" if child is not None else record_state), None
    states = ", ".join(f"{j.role} {j.state}" for j in known)
    if cancelled is not None or known[0].state == "cancelled":  # the top-most job we know of
        return "cancelled", f"jobs ended ({states}); the run was cancelled"
    return "failed", f"jobs ended ({states}) but the run record was never finalised ({record_state})"


def collect(ref: RunRef, reference: str | None = None) -> RunStatus:
    """A snapshot of the run `ref` names (its selected or latest attempt)."""
    attempts = (ref.record or {}).get("attempts") or []
    attempt = ref.attempt() or {}
    attempt_id = attempt.get("attempt_id")
    status = RunStatus(
        reference=reference or ref.artifact or ref.output_path,
        output_path=ref.output_path,
        artifact=attempt.get("artifact") or ref.artifact,
        kind=attempt.get("kind") or "rl",
        resources=dict(attempt.get("resources") or {}),
        run_id=(ref.record or {}).get("run_id"),
        attempt_id=attempt_id,
        attempt_number=(attempts.index(attempt) + 1) if attempt in attempts else 0,
        attempts_total=len(attempts),
        record_state=attempt.get("state"),
        fingerprint=attempt.get("fingerprint"),
        backend=attempt.get("backend"),
        runtime_profile=attempt.get("runtime_profile"),
        runtime_digest=attempt.get("runtime_digest"),
        topology=dict(attempt.get("topology") or {}),
        argv=list(attempt.get("argv") or []),
        submitted_at=attempt.get("submitted_at"),
        finished_at=attempt.get("finished_at"),
        failure=attempt.get("failure"),
        phases=dict(attempt.get("phases") or {}),
        damage=ref.damage,
    )
    doc, status.document_uri = launch_document(attempt, ref.output_path) if attempt else (None, None)
    attempts_root = doc.artifacts.attempts_root if doc else None
    if attempt_id and attempts_root:
        status.attempt_dir = attempt_dir(attempts_root, attempt_id)
    elif attempt.get("launch_document_uri"):
        status.attempt_dir = os.path.dirname(attempt["launch_document_uri"])
    elif attempt.get("attempt_dir"):  # a step job's
        status.attempt_dir = attempt["attempt_dir"]
    if not status.topology and doc is not None:
        status.topology = dataclasses.asdict(doc.cluster.allocation)
    tried: list[Backend] = []
    if attempt:
        tried, status.coordinator, status.child = run_jobs.run_jobs(attempt, ref.prefix)
    elif ref.job_id:
        status.coordinator = run_jobs.view("coordinator", ref.job_id, run_jobs.find_job(ref.job_id, ref.prefix))
    status.tasks = _tasks(doc, status.attempt_dir, status.runtime_profile or (doc.runtime.profile if doc else None))
    status.model = _model(doc, status.attempt_dir)
    status.steps = _steps(doc, status.attempt_dir)
    status.checkpoints = _checkpoints(doc)
    status.terminal = _terminal(doc, ref.output_path)
    status.export = _export(doc, status.terminal, status.checkpoints, ref.output_path)
    status.cancelled = _cancellation(attempt, ref.output_path, attempt_id)
    status.retry = _authorised(attempt.get("retry"))
    waivers = attempt.get("waivers")
    status.waivers = {
        str(gate): found
        for gate, entry in (waivers.items() if isinstance(waivers, dict) else ())
        if (found := _authorised(entry)) is not None
    }
    if status.failure is None and attempt_id and attempts_root:
        manifest = read_json(attempt_manifest(attempts_root, attempt_id)) or {}
        status.failure = get_path(manifest, "result.failure", None)
    status.state, status.state_reason = effective_state(
        status.record_state, status.coordinator, status.child, status.terminal, status.cancelled, attempt_id
    )
    if status.state == "failed" and FailureClass.from_json(attempt.get("failure_class")) is None:
        status.failed_jobs_log = _failed_jobs_log(status, tried)
    if status.state != "running":
        status.steps.pace = None  # a rate and an ETA describe a run that still trains
    status.phases = _phases(status.phases, status.attempt_dir, status.steps.first_time, status.cancelled)
    status.failure_class = _failure_class(status, attempt)
    status.wandb = _wandb(attempt, status.attempt_dir)
    status.score = read_score(ref.output_path)
    status.wandb_url = wandb_url(status.wandb)
    status.wandb_logger = _logs_to_wandb(doc)
    if ref.damage and not attempt:  # never "pending": the history is unreadable and nothing else names an attempt
        status.state, status.state_reason = "damaged", "no other state of the run names an attempt"
    refusals = (ref.record or {}).get("replay_refusals") or []
    if refusals and not attempt:  # never "pending": its coordinator refused to build it
        status.state, status.state_reason = "refused", replay_refusal(refusals[-1])
    return status


def replay_refusal(entry: Any) -> str:
    """A coordinator's refusal of a replay that built another graph than was judged, as status says it."""
    entry = entry if isinstance(entry, dict) else {}
    steps = [s for s in entry.get("steps") or [] if isinstance(s, dict)]
    differences = "; ".join(
        f"{s.get('identity')} judged {s.get('judged') or 'absent'}, replayed {s.get('replayed') or 'absent'}"
        + (f" (first differs at {s['field']})" if s.get("field") else "")
        for s in steps
    )
    variables = ", ".join(f"${name} ({how})" for name, how in (entry.get("environment") or {}).items())
    return (
        f"coordinator {entry.get('coordinator_job_id') or '?'} refused at {entry.get('at') or '?'}: its replay of "
        f"the main is not the graph that was judged: {differences or 'no step recorded'}"
        + (f"; the graph read {variables}" if variables else "")
    )


def _phases(
    recorded: dict[str, str], directory: str | None, first_logged: float | None, cancelled: Cancellation | None
) -> dict[str, str]:
    """The recorded phases, with those the attempt directory and the cancel tell that the record does
    not hold yet: the host records the tasks' phases as the attempt ends, and a cancel may stop it first."""
    found: dict[str, str] = {}
    if directory:
        with contextlib.suppress(OSError):  # an unreadable directory leaves the recorded phases
            found = marker_phases(directory)
    found.update(first_step_phase(first_logged))
    if cancelled is not None and cancelled.at:
        found["cancelled"] = cancelled.at
    return {**found, **recorded}


def _wandb(attempt: dict[str, Any], directory: str | None) -> dict[str, Any] | None:
    """The W&B run the host recorded, else (a running attempt) what the trainer wrote so far."""
    recorded = attempt.get("wandb")
    if isinstance(recorded, dict):
        return recorded
    found = read_json(storage.join(directory, WANDB_RUN)) if directory else None
    return found if isinstance(found, dict) else None


def wandb_url(run: dict[str, Any] | None) -> str | None:
    """The page of the W&B run: the URL wandb reported, else `https://wandb.ai/<entity>/<project>/runs/<id>`
    when all three are recorded. An offline run has no page until it is synced: None."""
    if not run:
        return None
    recorded = run.get("url")
    if isinstance(recorded, str) and recorded.startswith(("https://", "http://")):
        return recorded
    if run.get("mode") in OFFLINE_WANDB_MODES:
        return None
    parts = [run.get("entity"), run.get("project"), run.get("run_id") or run.get("id")]
    if not all(isinstance(part, str) and part for part in parts):
        return None
    entity, project, run_id = parts
    return f"{WANDB_SITE}/{entity}/{project}/runs/{run_id}"


def _logs_to_wandb(doc: SkyRLLaunchConfig | None) -> bool:
    """Whether the recipe's `trainer.logger` (one name or a list) names wandb."""
    logger = get_path(doc.skyrl, TRAINER.LOGGER, None) if doc else None
    return "wandb" in (logger if isinstance(logger, (list, tuple)) else [logger])


def _failure_class(status: RunStatus, attempt: dict[str, Any]) -> FailureClass | None:
    """What the host classified; for a failure it never classified (an observer finalised the
    attempt), what the failure message and the child's exit codes say."""
    if status.state != "failed":
        return None
    recorded = FailureClass.from_json(attempt.get("failure_class"))
    return recorded if recorded is not None else observed_failure_class(status)


FAILED_LOG_LINES = 200  # of each failed job: what a host classifying a failure reads of its child


def _failed(status: RunStatus) -> list[run_jobs.JobView]:
    """The failed jobs, the child's first: a job rlaunch stopped (cancelled: its parent had ended)
    is no evidence, its SIGTERM was rlaunch's own."""
    return [job for job in (status.child, status.coordinator) if job is not None and job.state == "failed"]


def _failed_jobs_log(status: RunStatus, tried: list[Backend]) -> list[str]:
    return [line for job in _failed(status) for line in run_jobs.log_tail(job.job_id, tried, FAILED_LOG_LINES)]


def observed_failure_class(status: RunStatus) -> FailureClass:
    """What the failure message, the failed jobs' exit codes (the child's, then the coordinator's: a
    coordinator killed under its child) and their backend's word on why they ended (Slurm's NODE_FAIL
    on the coordinator's node, which the host it killed could not know) say of a failure the host
    never classified; where they say nothing, what the failed jobs' last log lines say (a full disk
    under the prefix kept the host from recording the failure; the logs still name the write). A
    full disk the logs name decides: what followed it, a supervisor lost or an outcome unrecorded,
    failed on it too."""
    failed = _failed(status)
    codes = [r.exit_code for job in failed for r in job.replicas]
    said = "\n".join([status.failure or status.state_reason or "", *(job.message for job in failed if job.message)])
    logged = classify(said, status.failed_jobs_log, codes) if status.failed_jobs_log else None
    if logged is not None and logged.cause == DISK_FULL:  # what followed it (a lost supervisor) failed on it too
        return logged
    found = classify(said, exit_codes=codes)
    return logged if logged is not None and found.kind == UNCLASSIFIED else found
