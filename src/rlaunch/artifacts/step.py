"""ArtifactStep: a frozen handle on one versioned output. Constructing one runs nothing."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from rlaunch import storage
from rlaunch.artifacts.artifact import Artifact
from rlaunch.artifacts.context import StepContext
from rlaunch.artifacts.fingerprint import canonical_json, canonical_value, fingerprint_hash
from rlaunch.artifacts.identity import validate_name, validate_version
from rlaunch.errors import UserError
from rlaunch.experiment_code import ExperimentCode
from rlaunch.names import is_mutable
from rlaunch.step_jobs import StepExecution, function_path

A = TypeVar("A", bound=Artifact)


class FingerprintMismatchError(UserError, ValueError):
    """A step's fingerprint differs from the `expected_fingerprint` it pins."""


@dataclass(frozen=True, eq=False)
class ArtifactStep(Generic[A]):
    """One node of the artifact graph.

    `build_config(ctx)` is pure and turns the context into the config `run(config)` consumes.
    Handles compare by identity (two handles are equal only if they are the same object) and
    every dependency the config reads must be listed in `deps`. `execution` says where `run` runs:
    None in the coordinator, a `StepExecution` as a step job; placement, never part of the fingerprint.
    `code` is the experiment's own code the step ships (`ExperimentCode`): its digest is part of the
    fingerprint, and a step job imports it (its `run` function included) from the shipped copy.
    """

    name: str
    version: str
    artifact_type: type[A]
    run: Callable[[Any], A | None]
    build_config: Callable[[StepContext], Any]
    deps: tuple[ArtifactStep[Any], ...] = ()
    runtime_args: Mapping[str, Any] = field(default_factory=dict)
    expected_fingerprint: str | None = None
    execution: Any = None  # where `run` runs: None (the coordinator) or an `execution_type`
    code: ExperimentCode | None = None
    execution_type: ClassVar[type] = StepExecution
    submitted_by: ClassVar[str | None] = None  # the only path that may launch it (None: any runner)

    def __post_init__(self) -> None:
        from rlaunch.artifacts.versions import variant_name

        object.__setattr__(self, "name", variant_name(self.name, tuple(self.deps)))  # a sweep variant's own
        validate_name(self.name)
        validate_version(self.version, field=f"version of {self.name}")
        if not (isinstance(self.artifact_type, type) and issubclass(self.artifact_type, Artifact)):
            raise TypeError(f"{self.name}: artifact_type must be an Artifact subclass; got {self.artifact_type!r}")
        deps = tuple(self.deps)
        for dep in deps:
            if not isinstance(dep, ArtifactStep):
                raise TypeError(f"{self.name}: deps must be ArtifactStep handles; got {dep!r}")
        object.__setattr__(self, "deps", deps)
        if self.execution is not None and not isinstance(self.execution, self.execution_type):
            raise TypeError(
                f"{self.name}: execution must be a {self.execution_type.__name__} (or None: run in the coordinator); "
                f"got {self.execution!r}"
            )
        if self.code is not None and not isinstance(self.code, ExperimentCode):
            raise TypeError(f"{self.name}: code must be an ExperimentCode (or None); got {self.code!r}")
        if isinstance(self.execution, StepExecution):
            function_path(self.run, self.name)  # a task imports it by name: refuse a lambda now, not in the job
        object.__setattr__(self, "runtime_args", types.MappingProxyType(dict(self.runtime_args)))

    @property
    def identity(self) -> str:
        return f"{self.name}@{self.version}"

    def __artifact_identity__(self) -> str:
        return self.identity

    @property
    def mutable(self) -> bool:
        return is_mutable(self.version)

    def path(self, prefix: str | None = None) -> str:
        return storage.join(prefix or storage.default_prefix(), self.name, self.version)

    @functools.cached_property
    def fingerprint_config(self) -> Any:
        """The config built under placeholders: what identity is computed from."""
        return self.build_config(StepContext.for_fingerprint(self))

    @functools.cached_property
    def fingerprint_payload(self) -> str:
        # The dependencies' identities enter too, so bumping a dependency's version changes the
        # fingerprint even when the config never reads that dependency's path. Shipped code enters
        # by its digest, and only when declared: a step without it keeps the fingerprint it had.
        payload = {
            "type": self.artifact_type.type_name(),
            "config": canonical_value(self.fingerprint_config),
            "deps": sorted({dep.identity for dep in self.deps}),
        }
        if self.code is not None:
            payload["code"] = self.code.digest
        return canonical_json(payload)

    @functools.cached_property
    def fingerprint(self) -> str:
        value = fingerprint_hash(self.fingerprint_payload)
        if self.expected_fingerprint is not None and not value.startswith(self.expected_fingerprint):
            raise FingerprintMismatchError(
                f"{self.identity}: fingerprint {value} does not match expected_fingerprint "
                f"{self.expected_fingerprint}; the recipe changed, so bump the version (or update the pin)"
            )
        return value

    def __repr__(self) -> str:
        return f"ArtifactStep({self.identity})"


class GraphError(UserError, ValueError):
    """A graph that cannot be built: conflicting handles or a fixed version on a mutable one."""


def graph_handles(roots: Iterable[ArtifactStep[Any]]) -> list[ArtifactStep[Any]]:
    """Every handle reachable from `roots`, dependencies first, each once (by object identity).

    Iterative, so a chain of thousands of steps does not hit Python's recursion limit.
    """
    order: list[ArtifactStep[Any]] = []
    seen: set[int] = set()
    by_identity: dict[str, ArtifactStep[Any]] = {}

    def finish(step: ArtifactStep[Any]) -> None:
        other = by_identity.get(step.identity)
        if other is not None:
            if other.fingerprint != step.fingerprint:
                raise GraphError(
                    f"two different steps are both {step.identity} (fingerprints {other.fingerprint[:12]} and "
                    f"{step.fingerprint[:12]}); give one of them another name or version"
                )
            return
        by_identity[step.identity] = step
        order.append(step)

    for root in roots:
        if id(root) in seen:
            continue
        seen.add(id(root))
        stack: list[tuple[ArtifactStep[Any], Iterator[ArtifactStep[Any]]]] = [(root, iter(root.deps))]
        while stack:
            step, pending = stack[-1]
            for dep in pending:
                if id(dep) not in seen:
                    seen.add(id(dep))
                    stack.append((dep, iter(dep.deps)))
                    break
            else:
                stack.pop()
                finish(step)
    return order


def check_immutability(steps: Iterable[ArtifactStep[Any]]) -> None:
    """A fixed (calendar) version may not depend on a mutable (dev) one."""
    problems = [
        f"{step.identity} is a fixed version but depends on mutable {dep.identity}; "
        "make the dependent a -dev version too, or give the dependency a calendar version"
        for step in steps
        if not step.mutable
        for dep in step.deps
        if dep.mutable
    ]
    if problems:
        raise GraphError("\n".join(problems))
