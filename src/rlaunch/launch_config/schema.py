"""`SkyRLLaunchConfig`: the one document that crosses from the experiment side to the host.

Everything the host, the task bootstrap and the trainer need is a typed field here; nothing
crosses as per-field command-line flags. Loading rejects unknown keys and wrong types, naming the
path, and confines every path: storage locations are absolute paths or URLs, staging paths are
clean relative paths (`rlaunch.paths`). The `skyrl` section is the trainer recipe (SkyRL 0.4.0 key paths) with the role plan
rendered in; the host composes it onto the runtime's base config.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from rlaunch.launch_config.typed import DocumentError, decode, encode
from rlaunch.names import MAX_LABEL, InvalidNameError, job_name, name_refusal
from rlaunch.paths import location_problem, relative_path_problem
from rlaunch.runs.layout import RunPaths
from rlaunch.runs.sweep import SweepMembership
from rlaunch.secrets import credential_name_problem
from rlaunch.units import parse_size

SCHEMA_VERSION = 1
ATTEMPT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
Submission = Literal["prepare", "detach", "wait"]
BackendName = Literal["local", "ray", "iris", "slurm"]


@dataclass(frozen=True)
class RunSection:
    id: str
    attempt_id: str
    seed: int
    mode: Literal["train"] = "train"
    submission: Submission = "wait"
    export_hf: bool = False
    fingerprint: str = ""  # stamped by the launch host (launch_config.resume.run_fingerprint)
    artifact: str | None = None  # the RL artifact's name@version (the trainer's run name, e.g. on W&B)
    export_hf_default: bool = False  # the experiment left export_hf to its default (readiness says so)
    credentials: tuple[str, ...] = ()  # variables the run needs from its environment (names, never values)
    # The recipe keys set from the shell (`--set`, dotted key -> value): provenance, for the plan and
    # the run record; their values are in `skyrl` already (which the trainer reads).
    recipe_overrides: Mapping[str, Any] = field(default_factory=dict)
    # The sweep this run is a variant of (`rlaunch.runs.sweep.SweepMembership.to_dict`; None: not a
    # sweep's): the host keeps it at the run record's top level, where `rlaunch runs` groups by it.
    sweep: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class ResumeFrom:
    """An explicit checkpoint to start from (another version's, or this version's under an earlier
    runtime), pinned by its step and the runtime digest it was written under. A run with one keeps
    its own checkpoints under a root of its runtime (`pinned_checkpoint_root`), fresh on a repin."""

    checkpoint_root: str
    step: int
    runtime_digest: str


@dataclass(frozen=True)
class RuntimeSection:
    profile: str
    source_digest: str
    entrypoint: str = "standard"
    compatible_checkpoint_digests: tuple[str, ...] = ()
    resume_from: ResumeFrom | None = None


_DIGEST = re.compile(r"[0-9a-f]{64}")


def resume_from_problems(pin: ResumeFrom, where: str) -> list[str]:
    """What is wrong with a pinned checkpoint (`where` names the field)."""
    problems = []
    problem = location_problem(pin.checkpoint_root)
    if problem:
        problems.append(f"{where}.checkpoint_root={pin.checkpoint_root!r} {problem}")
    if isinstance(pin.step, bool) or not isinstance(pin.step, int) or pin.step < 1:
        problems.append(f"{where}.step={pin.step!r} must be the checkpoint's global step, an integer >= 1")
    if not isinstance(pin.runtime_digest, str) or not _DIGEST.fullmatch(pin.runtime_digest):
        problems.append(
            f"{where}.runtime_digest={pin.runtime_digest!r} must be the full 64-hex runtime digest the checkpoint "
            "was written under (its rlaunch_checkpoint.json says it)"
        )
    return problems


@dataclass(frozen=True)
class Allocation:
    """The physical gang: `num_nodes` replicas, each a whole node of `gpus_per_node` devices."""

    num_nodes: int
    gpus_per_node: int
    gpu_variant: str
    cpu: float
    memory: str
    disk: str

    def __post_init__(self) -> None:
        # Node and device counts are judged by the rules the host applies (`rlaunch.rules`).
        if self.cpu <= 0:
            raise ValueError(f"allocation.cpu={self.cpu} must be positive")
        for name in ("memory", "disk"):
            if parse_size(getattr(self, name), field=f"cluster.allocation.{name}") <= 0:
                raise ValueError(
                    f"cluster.allocation.{name}={getattr(self, name)!r} must be positive; write it like 16GB"
                )


@dataclass(frozen=True)
class CoordinatorSection:
    """The coordinator job that submitted this document: its resources and deadline (for a reader:
    the host does not allocate it, the experiment's `--run` did)."""

    cpu: float
    memory: str
    disk: str
    timeout_hours: float


@dataclass(frozen=True)
class ClusterSection:
    """Where and how the run is placed. `execution` names the experiment's execution class and
    `defaults` its launch settings the experiment left at their defaults (readiness marks them);
    a hand-written document leaves both empty."""

    backend: BackendName
    job_name: str
    allocation: Allocation
    placement: Mapping[str, Any] = field(default_factory=dict)
    priority: str | None = None
    max_retries: int = 0
    timeout_seconds: int = 0
    wandb_entity: str | None = None
    task_env: Mapping[str, str] = field(default_factory=dict)  # every task's and trainer's extra environment
    coordinator: CoordinatorSection | None = None
    execution: str | None = None
    defaults: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"cluster.max_retries={self.max_retries} cannot be negative")
        if self.timeout_seconds < 0:
            raise ValueError(f"cluster.timeout_seconds={self.timeout_seconds} cannot be negative (0 = no limit)")


@dataclass(frozen=True)
class RaySection:
    """How the gang of a Ray-driver runtime bootstraps Ray inside its allocation (`rlaunch.task.ray_cluster`).

    `port` is the head's GCS port; `spill_dir` an absolute node-local directory for object spilling
    (None: Ray's default, under its temp dir). Rank 0 waits `cluster_join_timeout_seconds` for
    every node to join; the other ranks wait `rendezvous_timeout_seconds` for rank 0's head record
    (and fail when rank 0 stops refreshing it that long). `driver_liveness_timeout_seconds` of
    silence on the trainer driver's stdout and stderr kills it (exit 124; 0 disables the watchdog).
    Ray's logs are copied to the attempt's durable `ray-logs/` every `log_sync_interval_seconds`
    and at the end.
    """

    port: int = 6379
    spill_dir: str | None = None
    rendezvous_timeout_seconds: int = 1800
    cluster_join_timeout_seconds: int = 1800
    driver_liveness_timeout_seconds: int = 9000
    log_sync_interval_seconds: int = 300

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ValueError(f"ray.port={self.port} is not a TCP port; choose one in 1..65535 (default 6379)")
        for name in ("rendezvous_timeout_seconds", "cluster_join_timeout_seconds", "log_sync_interval_seconds"):
            if getattr(self, name) <= 0:
                raise ValueError(f"ray.{name}={getattr(self, name)} must be positive")
        if self.driver_liveness_timeout_seconds < 0:
            raise ValueError(
                f"ray.driver_liveness_timeout_seconds={self.driver_liveness_timeout_seconds} cannot be negative "
                "(0 disables the watchdog)"
            )
        if self.spill_dir is not None and ("://" in self.spill_dir or not self.spill_dir.startswith("/")):
            raise ValueError(
                f"ray.spill_dir={self.spill_dir!r} must be an absolute node-local path without a scheme "
                "(e.g. /tmp/ray-spill), or null for Ray's default"
            )


@dataclass(frozen=True)
class ArtifactsSection(RunPaths):
    """Where the run's files live (the fields of `layout.RunPaths`), how many checkpoints resume
    keeps and how many days temporary storage (checkpoints, attempts) is kept."""

    resume_checkpoint_count: int = 2
    temporary_storage_ttl_days: int = 14

    def __post_init__(self) -> None:
        if not 1 <= self.resume_checkpoint_count <= 5:
            raise ValueError(
                f"artifacts.resume_checkpoint_count={self.resume_checkpoint_count} must be between 1 and 5"
            )
        if self.temporary_storage_ttl_days <= 0:
            raise ValueError(f"artifacts.temporary_storage_ttl_days={self.temporary_storage_ttl_days} must be positive")


@dataclass(frozen=True)
class ModelInput:
    uri: str
    identity: str
    local_path: str
    tokenizer_revision: str
    num_attention_heads: int | None = None
    context_length: int | None = None
    revision: str | None = None  # the source commit the model artifact recorded, when it has one
    hf_config: Mapping[str, Any] | None = None  # its config.json: the architecture the memory rules size
    artifact_type: str | None = None  # the model artifact's type (smoke parity compares hand-offs)
    # why no config.json is known before the model is built: a derived model whose step declares no
    # architecture (the memory table says it; a large launch refuses it unless waived)
    unsized_reason: str | None = None


@dataclass(frozen=True)
class DataInput:
    uri: str
    identity: str
    local_path: str
    relative_path: str = ""
    kind: Literal["directory"] = "directory"
    artifact_type: str | None = None  # the data artifact's type (smoke parity compares hand-offs)


@dataclass(frozen=True)
class InputsSection:
    """The run's inputs. `graph` is the artifact graph behind them with names and versions erased,
    one `Type(dependency, ...)` text per distinct input artifact (smoke parity compares it)."""

    model: ModelInput
    train_data: tuple[DataInput, ...] = ()
    validation_data: tuple[DataInput, ...] = ()
    graph: tuple[str, ...] = ()


@dataclass(frozen=True)
class Authorisation:
    """An operator's explicit go-ahead past a gate (`--retry`, `--skip-smoke-gate`): why, who, when."""

    reason: str
    by: Mapping[str, Any] = field(default_factory=dict)
    at: str = ""

    def __post_init__(self) -> None:
        if not self.reason.strip():
            raise ValueError("an authorisation needs a reason (it is kept in the run record)")


@dataclass(frozen=True)
class DeclaredSmoke:
    """The smoke run that rehearses this launch: its identity, its durable output path and its size
    (a launch bigger than its smoke is large; 0: not stated, as in a document written before it)."""

    identity: str
    output_path: str
    num_nodes: int = 0
    gpus: int = 0  # num_nodes x gpus_per_node of the smoke's allocation

    def __post_init__(self) -> None:
        for name in ("num_nodes", "gpus"):
            if getattr(self, name) < 0:
                raise ValueError(f"gates.smoke.{name}={getattr(self, name)} cannot be negative (0: not stated)")


@dataclass(frozen=True)
class CodeSection:
    """The experiment's own code shipped with the run (`rlaunch.experiment_code`): the bundle at
    `uri`, whose identity is `digest`, staged by every task and put on the trainer's PYTHONPATH;
    `reward` (`module:function`, a function of that code) is what the trainer scores completions
    with instead of the recipe's built-in `environment.env_class` (a runtime that can: trl-cpu)."""

    uri: str
    digest: str
    modules: tuple[str, ...] = ()
    reward: str | None = None

    def __post_init__(self) -> None:
        if not _DIGEST.fullmatch(self.digest):
            raise ValueError(f"code.digest={self.digest!r} must be the 64-hex sha256 of the shipped code")


WAIVABLE = ("large", "memory")  # the gates `--waive GATE=REASON` lets go (`rlaunch.judgement.judge`)


@dataclass(frozen=True)
class GatesSection:
    """What the launch gates read besides the run record (`rlaunch.judgement.gates`).

    A document without this section declares no smoke and carries no authorisation, so the host
    refuses a retry or a large launch from it exactly as `--run` would."""

    smoke: DeclaredSmoke | None = None
    smoke_gate_nodes: int = 1  # more nodes than this is a large launch
    retry: Authorisation | None = None
    skip_smoke_gate: Authorisation | None = None
    smoke_gate_gpus: int = 8  # more GPUs than this (whatever the accelerator) is a large launch
    is_smoke: bool = False  # declared a smoke (skyrl_step(..., is_smoke=True)): a rehearsal is never large
    # Gates let go with a reason (`--waive GATE=REASON`): gate -> the authorisation (who, when, why).
    waivers: Mapping[str, Authorisation] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("smoke_gate_nodes", "smoke_gate_gpus"):
            if getattr(self, name) < 0:
                raise ValueError(f"gates.{name}={getattr(self, name)} cannot be negative")
        unknown = sorted(set(self.waivers) - set(WAIVABLE))
        if unknown:
            raise ValueError(f"gates.waivers names {unknown}, which no gate lets go; waivable: {', '.join(WAIVABLE)}")


@dataclass(frozen=True)
class SkyRLLaunchConfig:
    schema_version: int
    run: RunSection
    runtime: RuntimeSection
    cluster: ClusterSection
    artifacts: ArtifactsSection
    inputs: InputsSection
    skyrl: Mapping[str, Any]
    ray: RaySection = field(default_factory=RaySection)
    gates: GatesSection = field(default_factory=GatesSection)
    code: CodeSection | None = None  # none: the trainer runs only the runtime's own code

    def __post_init__(self) -> None:
        if self.schema_version != SCHEMA_VERSION:
            raise ValueError(
                f"schema_version={self.schema_version} is not supported; this rlaunch reads {SCHEMA_VERSION}"
            )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = encode(self)
        return data

    def replace_skyrl(self, skyrl: Mapping[str, Any]) -> SkyRLLaunchConfig:
        from dataclasses import replace

        return replace(self, skyrl=skyrl)


def from_dict(data: Any) -> SkyRLLaunchConfig:
    config = decode(SkyRLLaunchConfig, data, what="SkyRLLaunchConfig")
    problems = confinement_problems(config)
    if config.runtime.resume_from is not None:
        problems += resume_from_problems(config.runtime.resume_from, "runtime.resume_from")
    for index, name in enumerate(config.run.credentials):
        problem = credential_name_problem(name)
        if problem:
            problems.append(f"run.credentials[{index}]: {problem}")
    problems += provenance_problems(config)
    if config.run.sweep is not None:
        try:
            SweepMembership.from_dict(config.run.sweep)
        except ValueError as exc:
            problems.append(f"run.{exc}")
    if problems:
        raise DocumentError(problems, what="SkyRLLaunchConfig")
    return config


def provenance_problems(config: SkyRLLaunchConfig) -> list[str]:
    """A recipe override the `skyrl` section does not run (a hand-edited document): the record
    would claim a value the trainer never saw."""
    from rlaunch.dotted import get_path

    absent = object()
    return [
        f"run.recipe_overrides.{key}={value!r} but skyrl.{key} is "
        f"{'absent' if (ran := get_path(config.skyrl, key, absent)) is absent else repr(ran)}; "
        f"set skyrl.{key} to {value!r} or drop it from run.recipe_overrides"
        for key, value in config.run.recipe_overrides.items()
        if not _same(get_path(config.skyrl, key, absent), value)
    ]


def _same(a: Any, b: Any) -> bool:
    """Equal and of one kind (True is not 1)."""
    return type(a) is type(b) and bool(a == b)


# Every RunPaths field of ArtifactsSection is a storage location (the rest is retention).
_LOCATIONS = tuple(f.name for f in dataclasses.fields(RunPaths))


def confinement_problems(config: SkyRLLaunchConfig) -> list[str]:
    """Paths and names that would leave their root: storage locations are absolute paths or URLs,
    staging paths are clean relative paths, the attempt id is a single safe name, and the job name,
    run id and artifact obey the name rule (`rlaunch.names`) every backend applies to its job."""
    problems = []
    for name in _LOCATIONS:
        value = getattr(config.artifacts, name)
        problem = location_problem(value)
        if problem:
            problems.append(f"artifacts.{name}={value!r} {problem}")
    inputs = config.inputs
    sources: list[tuple[str, ModelInput | DataInput]] = [("inputs.model", inputs.model)]
    sources += [(f"inputs.train_data[{i}]", d) for i, d in enumerate(inputs.train_data)]
    sources += [(f"inputs.validation_data[{i}]", d) for i, d in enumerate(inputs.validation_data)]
    for where, source in sources:
        problem = location_problem(source.uri)
        if problem:
            problems.append(f"{where}.uri={source.uri!r} {problem}")
        problem = relative_path_problem(source.local_path)
        if problem:
            problems.append(f"{where}.local_path={source.local_path!r} {problem}")
        relative = getattr(source, "relative_path", "")
        if relative and (problem := relative_path_problem(relative)):
            problems.append(f"{where}.relative_path={relative!r} {problem}")
    if config.code is not None and (problem := location_problem(config.code.uri)):
        problems.append(f"code.uri={config.code.uri!r} {problem}")
    if not ATTEMPT_ID.fullmatch(config.run.attempt_id):
        problems.append(
            f"run.attempt_id={config.run.attempt_id!r} must be 1-64 letters, digits, '_' or '-' (it names "
            "directories); let rlaunch generate it"
        )
    try:  # the host hands it to its backend as the JobSpec's name: refused here, before any allocation
        job_name(config.cluster.job_name, field="cluster.job_name")
    except InvalidNameError as exc:
        problems.append(str(exc))
    named = [("run.id", config.run.id)] + (
        [("run.artifact", config.run.artifact)] if config.run.artifact is not None else []
    )
    for where, value in named:  # the run id labels the child job and names its staging directory
        refusal = name_refusal(value, field=where, max_length=MAX_LABEL, segments=True)
        if refusal:
            problems.append(refusal)
    return problems


def from_dict_tolerant(data: Any) -> SkyRLLaunchConfig | None:
    """The document in `data`, or None when `data` is not a valid one.

    For readers of files other processes write (`rlaunch status`): a missing, partial or foreign
    document means "nothing to show", never an error. The host and writers use `from_dict`.
    """
    try:
        return from_dict(data)
    except (ValueError, TypeError):  # DocumentError is a ValueError
        return None


def loads(text: str | bytes, source: str = "<text>") -> SkyRLLaunchConfig:
    """Decode YAML text through the strict loader (`launch_config.loader`, imported on use: importing
    the schema (observe, the task) stays cheap); problems name `source`."""
    from rlaunch.launch_config.loader import load_yaml

    data = load_yaml(text, source=source, what="SkyRLLaunchConfig")
    try:
        return from_dict(data)
    except DocumentError as exc:
        if source == "<text>":
            raise
        raise DocumentError([f"{source}: {p}" for p in exc.problems], what="SkyRLLaunchConfig") from None


def load(url: str) -> SkyRLLaunchConfig:
    from rlaunch.launch_config.loader import read_document

    return loads(read_document(url, what="SkyRLLaunchConfig"), source=url)


def dumps(config: SkyRLLaunchConfig | Mapping[str, Any]) -> str:
    from rlaunch.launch_config.loader import dump_yaml

    return dump_yaml(config.to_dict() if isinstance(config, SkyRLLaunchConfig) else encode(config))
