"""Typed artifact values: the `path` of an output plus the value fields its record carries."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

from rlaunch.artifacts import records
from rlaunch.artifacts.fingerprint import qualified_name
from rlaunch.errors import UserError

A = TypeVar("A", bound="Artifact")


class ArtifactTypeMismatchError(UserError, TypeError):
    """The stored output was produced as another artifact type than the step now declares."""


@dataclass(frozen=True)
class Artifact:
    """Base class for what a step produces. Subclasses are frozen dataclasses adding value fields.

    The value fields (everything except `path`) are stored in the record and restored by `load`,
    so a downstream step can read a result without re-running anything.
    """

    path: str

    @classmethod
    def type_name(cls) -> str:
        return qualified_name(cls)

    def check_built(self, config: Any) -> None:
        """Refuse (raise a `UserError`) a built value that contradicts what its step's `config` declared
        of it. The runner calls it before the record is written, so a contradicted build fails its own
        step instead of a step downstream that trusted the declaration (a model's architecture:
        `rlaunch.sources.inputs.HfModel`)."""

    def values(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "path"}

    @classmethod
    def load(cls: type[A], path: str) -> A:
        """Read the record at `path`; raise if it was written for another artifact type."""
        record = records.read_record(path)
        if record is None:
            return cls(path=path)
        stored = record.get("result_type")
        if stored != cls.type_name():
            raise ArtifactTypeMismatchError(
                f"{record.get('name')}@{record.get('version')} at {path} holds a {stored}, but the step "
                f"now declares {cls.type_name()}; bump the version to build the new type"
            )
        try:
            return cls(path=path, **(record.get("result") or {}))
        except TypeError as exc:
            raise ArtifactTypeMismatchError(
                f"{record.get('name')}@{record.get('version')} at {path} holds a {stored} whose stored fields "
                f"{sorted(record.get('result') or {})} no longer fit the class ({exc}); bump the version to "
                "build the new type"
            ) from exc


@dataclass(frozen=True)
class Directory(Artifact):
    """An output that is just files under its path (no value fields)."""
