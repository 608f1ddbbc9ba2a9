"""Small steps with observable behaviour for the artifact-graph tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import Artifact, ArtifactStep, Directory, StepContext

DAY = "2026.11.30"


@dataclass(frozen=True)
class Count(Artifact):
    value: int


@dataclass(frozen=True)
class Label(Artifact):
    text: str


class Recorder:
    """Records which step functions ran, in which order, and how many ran at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[str] = []
        self.events: list[tuple[str, str]] = []  # ("start" | "end", name)
        self.active = 0
        self.max_active = 0

    def count(self, name: str) -> int:
        return self.calls.count(name)

    def run_fn(
        self,
        name: str,
        *,
        sleep: float = 0.0,
        fail: bool = False,
        result: Callable[[Any], Any] | None = None,
    ) -> Callable[[Any], Any]:
        def run(config: Any) -> Any:
            with self._lock:
                self.calls.append(name)
                self.events.append(("start", name))
                self.active += 1
                self.max_active = max(self.max_active, self.active)
            try:
                if sleep:
                    time.sleep(sleep)
                if fail:
                    raise RuntimeError(f"boom in {name}")
                storage.write_text_atomic(storage.join(config["output_path"], "out.txt"), name)
                return result(config) if result is not None else None
            finally:
                with self._lock:
                    self.active -= 1
                    self.events.append(("end", name))

        return run


def literal_config(literals: Mapping[str, Any], deps: tuple[ArtifactStep[Any], ...]) -> Callable[[StepContext], Any]:
    def build(ctx: StepContext) -> dict[str, Any]:
        return {
            "output_path": ctx.output_path,
            "inputs": [ctx.artifact_path(dep) for dep in deps],
            **literals,
        }

    return build


def make_step(
    name: str,
    version: str = DAY,
    *,
    deps: tuple[ArtifactStep[Any], ...] = (),
    literals: Mapping[str, Any] | None = None,
    recorder: Recorder | None = None,
    run: Callable[[Any], Any] | None = None,
    build_config: Callable[[StepContext], Any] | None = None,
    artifact_type: type[Artifact] = Directory,
    runtime_args: Mapping[str, Any] | None = None,
    expected_fingerprint: str | None = None,
    sleep: float = 0.0,
    fail: bool = False,
    result: Callable[[Any], Any] | None = None,
) -> ArtifactStep[Any]:
    if run is None:
        run = (recorder or Recorder()).run_fn(name, sleep=sleep, fail=fail, result=result)
    return ArtifactStep(
        name=name,
        version=version,
        artifact_type=artifact_type,
        run=run,
        build_config=build_config or literal_config(dict(literals or {}), deps),
        deps=deps,
        runtime_args=dict(runtime_args or {}),
        expected_fingerprint=expected_fingerprint,
    )


def quiet(messages: list[str]) -> Callable[[str], None]:
    """A Runner reporter that collects messages."""
    return messages.append
