"""`StoredFacts`: what planning one RL step reads from storage, gathered once and passed down.

A `SkyRLSpec` and a `skyrl_step` are pure descriptions: building them reads nothing. Everything
the preflight, the launch document and its views (the plan view, readiness, the resume check, the
gates) need from storage is read here, by `gather`, into one frozen value:

* the model: its architecture facts and `config.json` as the built artifact recorded them (else as
  its step declares them), the source revision it recorded (else the commit its step pins), and
  its own export (an RL run's Hugging Face model) when it has one;
* the data: what each built data artifact recorded of its splits;
* the run: its latest checkpoint (with the runtime digest and run fingerprint it was written
  under), the run record's attempts and whether the terminal manifest exists (the version is served);
* the declared smoke: its run record's attempts (None when no smoke is declared).

Planning gathers it once per RL step and prefix (`planning.plan`, into its `Planning`); the RL step
gathers it again once its inputs are built, right before it renders the document it launches.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import ArtifactStep, records
from rlaunch.judgement.gates import recorded_attempts
from rlaunch.rules.data_rules import DataFacts
from rlaunch.rules.model_shape import Unsized
from rlaunch.runs.layout import CheckpointInfo, RunPaths, latest_checkpoint
from rlaunch.runs.resume import ResumePoint, verified_resume
from rlaunch.sources.inputs import (
    ArtifactDataSource,
    ArtifactHfModel,
    declared_base,
    declared_config,
    pinned_commit,
    undeclared_reason,
)
from rlaunch.sources.model_facts import ModelFacts, StoredModel


@dataclass(frozen=True)
class StoredFacts:
    """One RL step's view of storage at one moment (see the module docstring)."""

    model: StoredModel = StoredModel()
    data: tuple[DataFacts, ...] = ()
    checkpoint: CheckpointInfo | None = None
    resume_point: ResumePoint | None = None  # the newest checkpoint that matches its manifest (runs.resume)
    attempts: tuple[Mapping[str, Any], ...] = ()
    served: bool = False  # the terminal manifest exists: `--run` serves the version, nothing is launched
    smoke_attempts: tuple[Mapping[str, Any], ...] | None = None  # None: no smoke declared


def gather(
    model: ArtifactHfModel,
    data: Sequence[tuple[str, ArtifactDataSource]],
    prefix: str,
    paths: RunPaths,
    smoke_output_path: str | None = None,
) -> StoredFacts:
    """Read, once, what planning a run of `model` on `data` (role, source) under `prefix` needs;
    `paths` are the run's own roots, `smoke_output_path` the declared smoke's."""
    return StoredFacts(
        model=stored_model(model, prefix),
        data=tuple(f for role, source in data if (f := _data_facts(role, source, prefix)) is not None),
        checkpoint=latest_checkpoint(paths.checkpoint_root),
        resume_point=verified_resume(paths.checkpoint_root),
        attempts=tuple(recorded_attempts(paths.output_path)),
        served=storage.exists(paths.terminal_manifest_uri),
        smoke_attempts=None if smoke_output_path is None else tuple(recorded_attempts(smoke_output_path)),
    )


def stored_model(model: ArtifactHfModel, prefix: str | None = None) -> StoredModel:
    """The model's facts from its step's stored record when it has been built; the source revision
    it recorded, else the commit its step pins (so a disagreeing tokenizer revision is caught before
    anything is fetched); the architecture from the config.json it recorded, else the declared one
    (a derived model's `FromBase`: its base's, read the same way). A derived model that declares
    none is said so (`unsized_reason`), for the memory table and the judgement."""
    result = _result(model.step, prefix)
    recorded = result.get("revision")
    config = model_architecture(model.step, prefix)
    facts = ModelFacts(
        result.get("num_attention_heads"),
        result.get("context_length"),
        recorded or pinned_commit(model.step),
        model.tokenizer_revision,
    ).with_config(config)
    unsized = None if config else undeclared_reason(model.step)
    if unsized:
        facts = replace(facts, architecture=Unsized("unknown", unsized))
    return StoredModel(facts, recorded, config, result.get("hf_model_uri"), unsized)


def model_architecture(step: ArtifactStep[Any], prefix: str | None) -> dict[str, Any] | None:
    """The config.json `step` recorded, else the one it declares, else its declared base's."""
    base = declared_base(step)
    recorded = _result(step, prefix).get("hf_config")
    return recorded or declared_config(step) or (model_architecture(base, prefix) if base is not None else None)


def _data_facts(role: str, source: ArtifactDataSource, prefix: str) -> DataFacts | None:
    """The splits a data artifact recorded when it was built (None: not built, or no facts)."""
    splits = _result(source.step, prefix).get("splits")
    return DataFacts(role, source.step.identity, source.relative_path, splits) if isinstance(splits, dict) else None


def _result(step: ArtifactStep[Any], prefix: str | None) -> dict[str, Any]:
    return (records.read_record(step.path(prefix)) or {}).get("result") or {}
