"""StepContext: the line between identity and placement.

Literals written in `build_config` bear identity. Values pulled from the context (output path,
prefix, region, runtime args, a dependency's path or loaded value) do not: when fingerprinting,
the context hands out placeholders instead of real values, so the same recipe has the same
fingerprint wherever and however it runs.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rlaunch.errors import UserError

if TYPE_CHECKING:
    from rlaunch.artifacts.artifact import Artifact
    from rlaunch.artifacts.step import ArtifactStep

REGION_ENV = "RLAUNCH_REGION"


class UndeclaredDependencyError(UserError, ValueError):
    """A builder read a step it did not list in `deps`."""


class UndeclaredRuntimeArgError(UserError, KeyError, ValueError):
    """A builder read a runtime arg it did not list in `runtime_args`.

    A KeyError for callers that look keys up, and a ValueError so the command line reports it as a
    recipe error like every other construction-time mistake.
    """

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class FingerprintTimeError(UserError, RuntimeError, ValueError):
    """A builder asked for a loaded value while the fingerprint was being computed.

    A recipe mistake found before anything runs, so also a ValueError like the other ones.
    """


class StepContext:
    """What `build_config(ctx)` may read besides its own literals."""

    def __init__(
        self,
        *,
        step: ArtifactStep[Any],
        output_path: str,
        prefix: str,
        region: str | None,
        is_fingerprint: bool,
        load: Callable[[ArtifactStep[Any]], Artifact] | None = None,
    ) -> None:
        self._step = step
        self._output_path = output_path
        self._prefix = prefix
        self._region = region
        self._load = load
        self._loaded: dict[int, Artifact] = {}
        self._declared = {id(dep) for dep in step.deps}  # a set: a wide fan-in stays linear
        self.is_fingerprint = is_fingerprint

    @classmethod
    def for_fingerprint(cls, step: ArtifactStep[Any]) -> StepContext:
        return cls(step=step, output_path="<output_path>", prefix="<prefix>", region="<region>", is_fingerprint=True)

    @classmethod
    def for_run(
        cls,
        step: ArtifactStep[Any],
        prefix: str,
        load: Callable[[ArtifactStep[Any]], Artifact] | None = None,
    ) -> StepContext:
        return cls(
            step=step,
            output_path=step.path(prefix),
            prefix=prefix,
            region=os.environ.get(REGION_ENV),
            is_fingerprint=False,
            load=load,
        )

    @property
    def output_path(self) -> str:
        return self._output_path

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def region(self) -> str | None:
        return self._region

    def artifact_path(self, dep: ArtifactStep[Any]) -> str:
        self._check_declared(dep)
        if self.is_fingerprint:
            return f"<{dep.identity}>"
        return dep.path(self._prefix)

    def resolved(self, dep: ArtifactStep[Any]) -> Artifact:
        """The loaded value of a declared dependency (read once from its record)."""
        self._check_declared(dep)
        if self.is_fingerprint:
            raise FingerprintTimeError(
                f"{self._step.identity}: ctx.resolved({dep.identity}) is unavailable while fingerprinting; "
                "branch on ctx.is_fingerprint and use ctx.artifact_path(dep) for identity"
            )
        key = id(dep)
        if key not in self._loaded:
            self._loaded[key] = self._load(dep) if self._load else dep.artifact_type.load(dep.path(self._prefix))
        return self._loaded[key]

    def runtime_arg(self, key: str) -> Any:
        args = self._step.runtime_args
        if key not in args:
            raise UndeclaredRuntimeArgError(
                f"{self._step.identity}: runtime arg {key!r} is not declared; declared: {sorted(args)}. "
                "Add it to runtime_args=... of the step"
            )
        return f"<{key}>" if self.is_fingerprint else args[key]

    def _check_declared(self, dep: ArtifactStep[Any]) -> None:
        if id(dep) not in self._declared:
            raise UndeclaredDependencyError(
                f"{dep.identity} is not a declared dependency of {self._step.identity}; add it to deps=(...)"
            )
