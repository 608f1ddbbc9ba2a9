"""Models and data as artifact dependencies, resolved into the launch document's locators.

A model is always an artifact step plus a pinned tokenizer revision; nothing depends on an
ambient checkpoint path or on whatever happens to be on a worker.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import Artifact, ArtifactStep, Directory, StepContext
from rlaunch.errors import UserError
from rlaunch.field_checks import require_str
from rlaunch.launch_config.schema import DataInput, ModelInput
from rlaunch.paths import ConfinementError, relative_path_problem
from rlaunch.sources.model_facts import StoredModel, architecture_differences

STAGED_MODELS = "models"
STAGED_DATA = "data"
# What a model step's build config declares of the model it builds: its config.json (`config`), or the
# dependency whose architecture it keeps (`architecture_of`: a derived model, see `FromBase`).
DECLARED_CONFIG = "config"
DECLARED_BASE = "architecture_of"


class ArchitectureMismatchError(UserError, ValueError):
    """A built model's config.json contradicts the architecture its step declared."""


@dataclass(frozen=True)
class HfModel(Artifact):
    """A Hugging Face model directory, with the architecture facts the preflight checks against."""

    num_attention_heads: int | None = None
    context_length: int | None = None
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256
    revision: str | None = None  # the source commit the files came from, when the model has one
    source: str | None = None  # where it came from (`hf://org/name`), when fetched
    hf_config: dict[str, Any] | None = None  # its config.json: the architecture the memory rules size

    def check_built(self, config: Any) -> None:
        """A model whose step declared its architecture (`DECLARED_CONFIG`) has it: its own config.json
        (else the one it records) describes the same facts the rules read, or its step fails naming both."""
        declared = config.get(DECLARED_CONFIG) if isinstance(config, Mapping) else None
        if not isinstance(declared, Mapping):
            return
        base = config.get(DECLARED_BASE)
        said = f"the architecture of its base {base} (FromBase)" if base else "the config.json its step declares"
        own = storage.join(self.path, "config.json")
        built = storage.read_json(own) if storage.exists(own) else self.hf_config
        if not isinstance(built, Mapping):
            raise ArchitectureMismatchError(
                f"the model built at {self.path} has no config.json (and records no hf_config), so it cannot be "
                f"checked against {said}; write its config.json there"
            )
        differences = architecture_differences(declared, built)
        if differences:
            raise ArchitectureMismatchError(
                f"the config.json of the model built at {self.path} describes another architecture than {said} "
                f"({'; '.join(differences)}): the dry run sized the launch by the declaration. Declare the "
                "architecture it has (FromConfig with its config.json), or build the model the declaration describes"
            )


@dataclass(frozen=True)
class FromBase:
    """A derived model (SFT, a merge, a merged LoRA) keeps the architecture of the model it was built
    from: its facts are the base's (recorded, else declared), so the dry run sizes it before it exists,
    and once built its own config.json must describe the same architecture.

    A model step declares it in its build config: `{..., **FromBase(base).declaration(ctx)}`, with
    `base` among its `deps`."""

    base: ArtifactStep[Any]

    def declaration(self, ctx: StepContext) -> dict[str, Any]:
        """The base's identity (identity, not placement, so the fingerprint holds it); in a run, also the
        base's config.json as built (else declared), which the built model is checked against."""
        ctx.artifact_path(self.base)  # refuses a base that is not a declared dependency
        if ctx.is_fingerprint:
            return {DECLARED_BASE: self.base.identity}
        built = getattr(ctx.resolved(self.base), "hf_config", None)
        config = built or declared_architecture(self.base)
        return {DECLARED_BASE: self.base.identity, **({DECLARED_CONFIG: dict(config)} if config else {})}


@dataclass(frozen=True)
class FromConfig:
    """A derived model whose architecture differs from its base's (a merge into another shape, a
    quantized export): its config.json, declared as a pinned hub source declares it (`config=`).

    A model step declares it in its build config: `{..., **FromConfig(config).declaration(ctx)}`."""

    config: Mapping[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.config, Mapping):
            raise TypeError(f"FromConfig.config must be the config.json as a dict, got {type(self.config).__name__}")

    def declaration(self, ctx: StepContext) -> dict[str, Any]:
        """The declared config.json itself (it bears identity: another architecture is another model)."""
        return {DECLARED_CONFIG: dict(self.config)}


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
    """The config.json a model step declares before it is built (a pinned hub source's `config`, a
    derived model's `FromConfig`)."""
    config = step.fingerprint_config
    declared = config.get(DECLARED_CONFIG) if isinstance(config, dict) else None
    return declared if isinstance(declared, dict) else None


def declared_base(step: ArtifactStep[Any]) -> ArtifactStep[Any] | None:
    """The dependency whose architecture a derived model step declares it keeps (`FromBase`)."""
    config = step.fingerprint_config
    identity = config.get(DECLARED_BASE) if isinstance(config, dict) else None
    return next((dep for dep in step.deps if dep.identity == identity), None) if identity else None


def declared_architecture(step: ArtifactStep[Any]) -> dict[str, Any] | None:
    """The config.json a model step declares, directly or through the bases it declares it keeps."""
    base = declared_base(step)
    return declared_config(step) or (declared_architecture(base) if base is not None else None)


def undeclared_reason(step: ArtifactStep[Any]) -> str | None:
    """Why nothing is known, until it is built, of a derived model (built from another model: trained,
    merged) that declares no architecture: no model rule (context, heads, memory) can judge a launch of it."""
    models = sorted(d.identity for d in step.deps if issubclass(d.artifact_type, HfModel))
    derived = models and issubclass(step.artifact_type, HfModel)  # an RL run (its own type) is not one
    if not derived or declared_config(step) is not None or declared_base(step) is not None:
        return None
    return (
        f"{step.identity} is a derived model (built from {', '.join(models)}) whose "
        "step declares no architecture; declare it in the step's build config, FromBase(<the model it is built "
        "from>) or FromConfig(<its config.json>), so the context, heads and memory rules judge it before it is built"
    )


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
            unsized_reason=stored.unsized_reason,
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
