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
from rlaunch.artifacts import Artifact, ArtifactStep, Directory, StepContext, records
from rlaunch.launch_config.schema import DataInput, ModelInput
from rlaunch.paths import ConfinementError, relative_path_problem
from rlaunch.rules.data_rules import DataFacts
from rlaunch.skyrl.fields import require_str
from rlaunch.skyrl.model_facts import ModelFacts

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
    the commit and the source (`rlaunch.skyrl.hub.hf_dataset_source`).
    """

    splits: dict[str, Any] | None = None  # None: computed from the files (at build)
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    revision: str | None = None
    source: str | None = None

    def __post_init__(self) -> None:
        if self.splits is None:
            from rlaunch.skyrl.data_facts import split_facts

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

    def stored_facts(self, prefix: str | None = None) -> ModelFacts:
        """Architecture facts from the model step's stored record, when it has been built; the source
        revision it recorded, else the commit its step pins (a hub source), so a disagreeing
        tokenizer revision is caught before anything is fetched; the architecture from the config.json
        it recorded, else the one its step declares."""
        record = records.read_record(self.step.path(prefix))
        result = (record or {}).get("result") or {}
        return ModelFacts(
            result.get("num_attention_heads"),
            result.get("context_length"),
            result.get("revision") or pinned_commit(self.step),
            self.tokenizer_revision,
        ).with_config(result.get("hf_config") or declared_config(self.step))

    def locator(self, ctx: StepContext) -> ModelInput:
        root = ctx.artifact_path(self.step)
        facts = ModelFacts()
        uri = root
        hf_config = None
        if not ctx.is_fingerprint:
            value = ctx.resolved(self.step)
            facts = ModelFacts(
                getattr(value, "num_attention_heads", None),
                getattr(value, "context_length", None),
                getattr(value, "revision", None),
            )
            hf_config = getattr(value, "hf_config", None) or declared_config(self.step)
            exported = getattr(value, "hf_model_uri", None)
            if self.relative_path is None and exported:
                uri = exported
        if self.relative_path:
            uri = storage.join(root, self.relative_path)
        return ModelInput(
            uri=uri,
            identity=f"<{self.step.identity}>" if ctx.is_fingerprint else artifact_identity(self.step),
            local_path=f"{STAGED_MODELS}/{_stage_name(self.step)}",
            tokenizer_revision=self.tokenizer_revision,
            num_attention_heads=facts.num_attention_heads,
            context_length=facts.context_length,
            revision=facts.revision,
            hf_config=hf_config,
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

    def stored_facts(self, role: str, prefix: str | None = None) -> DataFacts | None:
        """The splits the data artifact recorded when it was built (None: not built, or no facts)."""
        record = records.read_record(self.step.path(prefix))
        splits = ((record or {}).get("result") or {}).get("splits")
        if not isinstance(splits, dict):
            return None
        return DataFacts(role, self.step.identity, self.relative_path, splits)

    def locator(self, ctx: StepContext) -> DataInput:
        return DataInput(
            uri=ctx.artifact_path(self.step),
            identity=f"<{self.step.identity}>" if ctx.is_fingerprint else artifact_identity(self.step),
            local_path=f"{STAGED_DATA}/{_stage_name(self.step)}",
            relative_path=self.relative_path,
        )


def _check_relative(field_name: str, value: str) -> None:
    problem = relative_path_problem(value, root="the artifact")
    if problem:
        raise ConfinementError(f"{field_name}={value!r} {problem}")
