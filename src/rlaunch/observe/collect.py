"""Everything about one attempt of an RL run, read into a typed `RunStatus` snapshot.

Pure reads: the run record, the launch document the host resolved, the job states (through the
backend), the join markers, the trainer's model-load record and metrics, the checkpoints, the
export and the terminal manifest. Nothing here writes.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import records as artifact_records
from rlaunch.dotted import get_path
from rlaunch.launch_config import schema
from rlaunch.launch_config.failures import FailureClass, classify
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.observe import run_jobs
from rlaunch.observe.resolve import RunRef
from rlaunch.observe.run_files import list_names, read_document, read_json, read_metrics, read_text
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

TERMINAL_STATES = ("succeeded", "failed", "cancelled", "prepared")
WEIGHT_SUFFIXES = (".safetensors", ".bin")
MAX_MARKER_READS = 256  # bounded reads: a huge gang's markers beyond this are counted by name only
_REPLICA_MARKER = re.compile(r"^replica-(\d+)\.json$")
_TRAINER_MARKER = re.compile(r"^trainer-rank-(\d+)\.json$")


@dataclass
class Joined:
    rank: int
    host: str | None = None
    time: str | None = None
    pid: int | None = None
    world_size: int | None = None


@dataclass
class Tasks:
    """Who joined: every replica of the child gang, and every trainer process."""

    expected_replicas: int | None = None
    replicas: list[Joined] = field(default_factory=list)
    expected_trainer_processes: int | None = None
    trainer_launcher: str | None = None  # "torchrun": one trainer process per device slot
    trainers: list[Joined] = field(default_factory=list)

    @property
    def missing_replicas(self) -> list[int]:
        joined = {j.rank for j in self.replicas}
        return [r for r in range(self.expected_replicas or 0) if r not in joined]

    @property
    def missing_trainers(self) -> list[int]:
        joined = {j.rank for j in self.trainers}
        return [r for r in range(self.expected_trainer_processes or 0) if r not in joined]


@dataclass
class ModelLoad:
    """The model the document configured versus the model the trainer recorded loading."""

    configured: str | None = None  # the document's task-relative trainer.policy.model.path
    input_uri: str | None = None
    expected_identity: str | None = None
    recorded: bool = False  # model_load.json exists
    configured_path: str | None = None  # the staged path the trainer was handed
    loaded_path: str | None = None
    identity: str | None = None
    weights_sha256: str | None = None
    weight_files: dict[str, str] = field(default_factory=dict)
    expected_weight_files: dict[str, str] = field(default_factory=dict)  # from the model artifact record
    resumed_from_step: int | None = None
    architecture: str | None = None
    num_parameters: int | None = None


@dataclass
class Steps:
    """Optimizer steps from the attempt's metrics log."""

    url: str | None = None
    count: int = 0
    first_step: int | None = None
    latest_step: int | None = None
    latest_training_step: int | None = None  # runtimes with several optimizer steps per training step
    final_step: int | None = None  # the document's trainer.max_training_steps
    increasing: bool = True
    steps_per_minute: float | None = None
    last: dict[str, Any] | None = None
    complete: bool = True  # False when a very long log was read as head and tail only


@dataclass
class Checkpoints:
    root: str | None = None
    steps: list[int] = field(default_factory=list)  # kept: each with its manifest (rlaunch_checkpoint.json)
    incomplete: list[int] = field(default_factory=list)  # a directory without its manifest: a save cut short
    latest_step: int | None = None
    latest_path: str | None = None
    latest_meta: dict[str, Any] | None = None  # rlaunch_checkpoint.json of the latest checkpoint
    marker_error: str | None = None


@dataclass
class Export:
    wanted: bool = False  # the document asks for an HF export
    uri: str | None = None
    files: list[str] = field(default_factory=list)

    @property
    def present(self) -> bool:
        return "config.json" in self.files and any(f.endswith(WEIGHT_SUFFIXES) for f in self.files)


@dataclass
class Terminal:
    uri: str | None = None
    exists: bool = False
    state: str | None = None
    attempt_id: str | None = None
    global_step: int | None = None
    failure: str | None = None


@dataclass
class Cancellation:
    by: str
    at: str | None
    reason: str | None = None


@dataclass
class Authorised:
    """An operator's recorded go-ahead past a gate (`--retry`, `--skip-smoke-gate`)."""

    by: str
    at: str | None
    reason: str | None = None


@dataclass
class RunStatus:
    reference: str
    output_path: str
    artifact: str | None = None
    kind: str = "rl"  # "step": a step job's attempt (resources and jobs; no trainer, checkpoints or export)
    resources: dict[str, Any] = field(default_factory=dict)  # a step job's, per node
    run_id: str | None = None
    attempt_id: str | None = None
    attempt_number: int = 0  # 1-based position among the recorded attempts
    attempts_total: int = 0
    state: str = "unknown"  # the effective state: the record reconciled with the jobs
    state_reason: str | None = None
    record_state: str | None = None
    fingerprint: str | None = None
    backend: str | None = None
    runtime_profile: str | None = None
    runtime_digest: str | None = None
    topology: dict[str, Any] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    submitted_at: str | None = None
    finished_at: str | None = None
    failure: str | None = None
    phases: dict[str, str] = field(default_factory=dict)  # see launch_config.run_record
    coordinator: run_jobs.JobView | None = None
    child: run_jobs.JobView | None = None
    tasks: Tasks = field(default_factory=Tasks)
    model: ModelLoad = field(default_factory=ModelLoad)
    steps: Steps = field(default_factory=Steps)
    checkpoints: Checkpoints = field(default_factory=Checkpoints)
    export: Export = field(default_factory=Export)
    terminal: Terminal = field(default_factory=Terminal)
    cancelled: Cancellation | None = None
    retry: Authorised | None = None  # this attempt relaunched a failed or cancelled one, by --retry
    waivers: dict[str, Authorised] = field(default_factory=dict)  # gates let go with a reason (judgement.judge)
    failure_class: FailureClass | None = None  # deterministic or operational (launch_config.failures)
    wandb: dict[str, Any] | None = None  # the W&B run the trainer logged to (its evidence, wandb.json)
    attempt_dir: str | None = None
    document_uri: str | None = None
    damage: str | None = None  # the run record is damaged: the attempt shown was rebuilt from other state

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        if self.failure_class is not None:
            data["failure_class"] = self.failure_class.to_json()
        data["tasks"]["missing_replicas"] = self.tasks.missing_replicas
        data["tasks"]["missing_trainer_processes"] = self.tasks.missing_trainers
        data["export"]["present"] = self.export.present
        data["is_terminal"] = self.is_terminal
        return data


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
        model.configured = get_path(doc.skyrl, "trainer.policy.model.path", None) or doc.inputs.model.local_path
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


def _steps(doc: SkyRLLaunchConfig | None, directory: str | None) -> Steps:
    final = get_path(doc.skyrl, "trainer.max_training_steps", None) if doc else None
    steps = Steps(final_step=int(final) if isinstance(final, (int, float)) else None)
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
    if isinstance(t0, (int, float)) and isinstance(t1, (int, float)) and t1 > t0 and len(records) > 1:
        steps.steps_per_minute = (numbers[-1] - numbers[0]) / (t1 - t0) * 60.0
    return steps


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
    """The run's state: what the record says, corrected by the jobs when the record was never finalised."""
    if terminal.exists and terminal.state == "succeeded" and terminal.attempt_id == attempt_id:
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
    if attempt:
        _, status.coordinator, status.child = run_jobs.run_jobs(attempt, ref.prefix)
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
    status.failure_class = _failure_class(status, attempt)
    status.wandb = _wandb(attempt, status.attempt_dir)
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


def _wandb(attempt: dict[str, Any], directory: str | None) -> dict[str, Any] | None:
    """The W&B run the host recorded, else (a running attempt) what the trainer wrote so far."""
    recorded = attempt.get("wandb")
    if isinstance(recorded, dict):
        return recorded
    found = read_json(storage.join(directory, WANDB_RUN)) if directory else None
    return found if isinstance(found, dict) else None


def _failure_class(status: RunStatus, attempt: dict[str, Any]) -> FailureClass | None:
    """What the host classified; for a failure it never classified (an observer finalised the
    attempt), what the failure message and the child's exit codes say."""
    if status.state != "failed":
        return None
    recorded = FailureClass.from_json(attempt.get("failure_class"))
    return recorded if recorded is not None else observed_failure_class(status)


def observed_failure_class(status: RunStatus) -> FailureClass:
    """What the failure message and the failed jobs' exit codes (the child's, then the coordinator's:
    a coordinator killed under its child) say of a failure the host never classified. A job rlaunch
    stopped (cancelled: its parent had ended) is no evidence: its SIGTERM was rlaunch's own."""
    failed = [job for job in (status.child, status.coordinator) if job is not None and job.state == "failed"]
    codes = [r.exit_code for job in failed for r in job.replicas]
    return classify(status.failure or status.state_reason, exit_codes=codes)
