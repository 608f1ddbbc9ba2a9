"""How an experiment main was called: what its coordinator replays."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlaunch.artifacts.judged import Judged
from rlaunch.artifacts.step import ArtifactStep
from rlaunch.runs.sweep import SweepMembership


@dataclass(frozen=True)
class Sweep:
    """A sweep as built: its name, and each variant with the terminal steps built for it (`--sweep`,
    or `rlaunch.artifacts.variants` in the main)."""

    name: str
    variants: tuple[tuple[SweepMembership, tuple[ArtifactStep[Any], ...]], ...]


@dataclass(frozen=True)
class Invocation:
    """Everything an executor needs to know about how the experiment was called."""

    module: str | None
    argv: tuple[str, ...]
    version: str
    max_concurrent: int
    prefix: str
    options: Mapping[str, Any] = field(default_factory=dict)
    judged: Judged = field(default_factory=Judged)  # the graph as built here, and what its building read
    sweep: Sweep | None = None  # the variants this one submission builds (None: not a sweep)

    def replayed_argv(self, python: str) -> tuple[str, ...]:
        """The coordinator's command: the same module and options, at the same concurrency."""
        assert self.module is not None
        return (
            python,
            "-m",
            self.module,
            *without_max_concurrent(self.argv),
            "--max-concurrent",
            str(self.max_concurrent),
        )


def without_max_concurrent(argv: tuple[str, ...]) -> list[str]:
    """`argv` without `--max-concurrent N` (or `=N`): the replay states it once, from the invocation."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--max-concurrent":
            skip = True
            continue
        if arg.startswith("--max-concurrent="):
            continue
        out.append(arg)
    return out
