"""The typed snapshot of one attempt of an RL run (`RunStatus`), as `rlaunch.observe.collect` reads it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from rlaunch.launch_config.failures import FailureClass
from rlaunch.observe import run_jobs
from rlaunch.observe.pace import Pace
from rlaunch.observe.scores import Score

TERMINAL_STATES = ("succeeded", "failed", "cancelled", "prepared")
WEIGHT_SUFFIXES = (".safetensors", ".bin")


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
    first_time: float | None = None  # when the first step was logged (epoch seconds)
    latest_step: int | None = None
    latest_training_step: int | None = None  # runtimes with several optimizer steps per training step
    final_step: int | None = None  # the document's trainer.max_training_steps
    increasing: bool = True
    steps_per_minute: float | None = None
    last: dict[str, Any] | None = None
    complete: bool = True  # False when a very long log was read as head and tail only
    pace: Pace | None = None  # the recent rate and the ETA: only while the attempt runs


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
    # the failed jobs' last log lines, read when no class was recorded: evidence for `failure_class`
    # (whose `evidence` is the line that decided), not shown
    failed_jobs_log: list[str] = field(default_factory=list, repr=False)
    wandb: dict[str, Any] | None = None  # the W&B run the trainer logged to (its evidence, wandb.json)
    wandb_url: str | None = None  # that run's page: as recorded, else built from its entity, project and id
    wandb_logger: bool = False  # the recipe's trainer.logger names wandb
    attempt_dir: str | None = None
    document_uri: str | None = None
    damage: str | None = None  # the run record is damaged: the attempt shown was rebuilt from other state
    score: Score | None = None  # an evaluation's accuracy and interval (its report.json), when it wrote one

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        del data["failed_jobs_log"]
        if self.failure_class is not None:
            data["failure_class"] = self.failure_class.to_json()
        data["tasks"]["missing_replicas"] = self.tasks.missing_replicas
        data["tasks"]["missing_trainer_processes"] = self.tasks.missing_trainers
        data["export"]["present"] = self.export.present
        data["is_terminal"] = self.is_terminal
        if self.score is not None:
            data["score"]["headline"] = self.score.headline()
        return data
