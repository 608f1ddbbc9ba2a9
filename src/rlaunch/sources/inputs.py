"""Models and data as artifact dependencies, resolved into the launch document's locators.

A model is always an artifact step plus a pinned tokenizer revision; nothing depends on an
ambient checkpoint path or on whatever happens to be on a worker.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import Artifact, ArtifactStep, Directory, StepContext
from rlaunch.field_checks import require_str
from rlaunch.launch_config.schema import DataInput, ModelInput
from rlaunch.paths import ConfinementError, relative_path_problem
from rlaunch.sources.model_facts import StoredModel

STAGED_MODELS = "models"
STAGED_DATA = "data"


@dataclass(frozen=True)
class HfModel(Artifact):
    """A Hugging Face model directory, with the architecture facts the preflight checks against."""

    num_attention_heads: int | None = None
    context_length: int | None = None
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    revision: str | None = None  # the source commit the files came from, when the model has one
    source: str | None = None  # where it came from (`hf://org/name`), when fetched
    hf_config: dict[str, Any] | None = None  # its config.json: the architecture the memory rules size


@dataclass(frozen=True)
class PromptData(Directory):
    """Prompt rows for RL (.jsonl/.json/.parquet files under `path`, one split per file).

    Built with `PromptData(path=...)`, it reads its files once and records per split the row
    count, the field names and the first row lacking a field (`splits`), which the preflight
    checks against the fields the runtime reads. A hub dataset also records its files' sha256,
    the commit and the source (`rlaunch.sources.hub.hf_dataset_source`).
    """

    splits: dict[str, Any] | None = None  # None: computed from the files (at build)
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    revision: str | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        if self.splits is None:
            from rlaunch.sources.data_facts import split_facts

            object.__setattr__(self, "splits", split_facts(self.path) if storage.exists(self.path) else {})


COMMIT = re.compile(r"^[0-9a-f]{40}$")


def pinned_commit(step: ArtifactStep[Any]) -> str | None:
    """The 40-hex source commit a model step's config pins (`revision`), if it pins one."""
    config = step.fingerprint_config
    revision = config.get("revision") if isinstance(config, dict) else None
    return revision if isinstance(revision, str) and COMMIT.match(revision) else None


def declared_config(step: ArtifactStep[Any]) -> dict[str, Any] | None:
    """The config.json a model step declares before it is built (a pinned hub source's `config`)."""
    config = step.fingerprint_config
    declared = config.get("config") if isinstance(config, dict) else None
    return declared if isinstance(declared, dict) else None


def artifact_identity(step: ArtifactStep[Any]) -> str:
    return f"{step.identity}:{step.fingerprint}"


def artifact_type(step: ArtifactStep[Any]) -> str:
    name: str = step.artifact_type.type_name()
    return name


def graph_shape(step: ArtifactStep[Any]) -> str:
    """The graph behind `step` with names and versions erased: `Type(dependency, ...)`, sorted."""
    deps = sorted(graph_shape(dep) for dep in step.deps)
    return f"{artifact_type(step)}({', '.join(deps)})"


def _stage_name(step: ArtifactStep[Any]) -> str:
    return posixpath.basename(step.name)


@dataclass(frozen=True)
class ArtifactHfModel:
    step: ArtifactStep[Any]
    tokenizer_revision: str
    relative_path: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.step, ArtifactStep):
            raise TypeError(f"ArtifactHfModel.step must be an ArtifactStep, got {self.step!r}")
        require_str("ArtifactHfModel", "tokenizer_revision", self.tokenizer_revision)
        if self.relative_path is not None:
            _check_relative("ArtifactHfModel.relative_path", self.relative_path)

    def deps(self) -> tuple[ArtifactStep[Any], ...]:
        return (self.step,)

    def locator(self, ctx: StepContext, stored: StoredModel | None = None) -> ModelInput:
        """The document's model input; `stored` (what storage holds of the model: `stored_facts`)
        fills its facts once placement is real (never while fingerprinting)."""
        root = ctx.artifact_path(self.step)
        stored = StoredModel() if ctx.is_fingerprint or stored is None else stored
        uri = root
        if self.relative_path:
            uri = storage.join(root, self.relative_path)
        elif self.relative_path is None and stored.exported_uri:  # a trained model: its own export
            uri = stored.exported_uri
        return ModelInput(
            uri=uri,
            identity=f"<{self.step.identity}>" if ctx.is_fingerprint else artifact_identity(self.step),
            local_path=f"{STAGED_MODELS}/{_stage_name(self.step)}",
            tokenizer_revision=self.tokenizer_revision,
            num_attention_heads=stored.facts.num_attention_heads,
            context_length=stored.facts.context_length,
            revision=stored.recorded_revision,
            hf_config=stored.config,
            artifact_type=artifact_type(self.step),
        )


@dataclass(frozen=True)
class ArtifactDataSource:
    step: ArtifactStep[Any]
    relative_path: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.step, ArtifactStep):
            raise TypeError(f"ArtifactDataSource.step must be an ArtifactStep, got {self.step!r}")
        if self.relative_path:
            _check_relative("ArtifactDataSource.relative_path", self.relative_path)

    def deps(self) -> tuple[ArtifactStep[Any], ...]:
        return (self.step,)

    def locator(self, ctx: StepContext) -> DataInput:
        return DataInput(
            uri=ctx.artifact_path(self.step),
            identity=f"<{self.step.identity}>" if ctx.is_fingerprint else artifact_identity(self.step),
            local_path=f"{STAGED_DATA}/{_stage_name(self.step)}",
            relative_path=self.relative_path,
            artifact_type=artifact_type(self.step),
        )


def _check_relative(field_name: str, value: str) -> None:
    problem = relative_path_problem(value, root="the artifact")
    if problem:
        raise ConfinementError(f"{field_name}={value!r} {problem}")
