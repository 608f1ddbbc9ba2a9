"""Where a step runs: in the coordinator (no execution), or as a step job with declared resources.

A `StepExecution` is placement, never identity: the fingerprint of a step is the same whether it
runs in the coordinator or as a job of any size (a test proves it). A step job is a child job of
whatever runs the graph (the RL coordinator, on the coordinator's backend): it stages the step's
inputs by identity, runs the step's function on rank 0 in a task, and hands its artifact's values
back; the runner records the artifact exactly as for a step run in the coordinator.

`StepJobRequest` is what the runner hands the step-job path (`StepJobs`), as plain values: the
function by import path, the config as built in the coordinator, the inputs' identities, and the
experiment's code the step ships (`ExperimentCode`), which the job imports before its function.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from rlaunch.errors import UserError
from rlaunch.experiment_code import ExperimentCode
from rlaunch.units import parse_size


@dataclass(frozen=True, kw_only=True)
class StepExecution:
    """A step job's placement: per-node resources, node count, time limit and runtime.

    runtime             the runtime profile whose environment the job builds (or reuses) before the
                        step's function runs; the preflight checks it exists (None: rlaunch's own)
    accelerators        devices per node, of `accelerator_type` (e.g. 8 x "H100"); 0 on CPU
    cpu/memory/disk     per node
    nodes               replicas of the job; the function runs on rank 0
    time_limit_seconds  the job's wall-clock limit: what the plan's GPU-hours are computed from
    max_retries         the backend's retries of a failed replica (not a relaunch of the step)
    """

    runtime: str | None = None
    accelerators: int = 0
    accelerator_type: str | None = None
    cpu: float = 1.0
    memory: str = "4GB"
    disk: str = "10GB"
    nodes: int = 1
    time_limit_seconds: int = 3600
    max_retries: int = 0

    def __post_init__(self) -> None:
        owner = "StepExecution"
        for name in ("accelerators", "nodes", "time_limit_seconds", "max_retries"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"{owner}.{name} must be an int, got {value!r}")
        if not isinstance(self.cpu, (int, float)) or isinstance(self.cpu, bool) or self.cpu <= 0:
            raise ValueError(f"{owner}.cpu={self.cpu!r} must be a positive number of cores")
        if self.accelerators < 0:
            raise ValueError(f"{owner}.accelerators={self.accelerators} cannot be negative (0: CPU only)")
        if self.accelerators and not self.accelerator_type:
            raise ValueError(
                f"{owner}.accelerators={self.accelerators} needs accelerator_type (e.g. 'H100'): the plan "
                "checks the node width of that device"
            )
        if self.nodes < 1:
            raise ValueError(f"{owner}.nodes={self.nodes} must be at least 1")
        if self.time_limit_seconds <= 0:
            raise ValueError(
                f"{owner}.time_limit_seconds={self.time_limit_seconds} must be positive: a step job's cost is "
                "bounded by its limit"
            )
        if self.max_retries < 0:
            raise ValueError(f"{owner}.max_retries={self.max_retries} cannot be negative")
        parse_size(self.memory, field=f"{owner}.memory")
        parse_size(self.disk, field=f"{owner}.disk")

    @property
    def gpu_hours(self) -> float:
        """The most device-hours the job can allocate: every node's accelerators for its whole limit."""
        return self.nodes * self.accelerators * self.time_limit_seconds / 3600

    def describe(self) -> str:
        """One line for the plan: where the job runs and what it holds."""
        devices = f"{self.accelerators} x {self.accelerator_type}" if self.accelerators else "no accelerator"
        runtime = self.runtime or "rlaunch"
        return (
            f"step job: {self.nodes} node(s) x ({devices}, {self.cpu:g} CPU, {self.memory} memory, {self.disk} disk), "
            f"runtime {runtime}, limit {self.time_limit_seconds}s"
        )


class StepFunctionError(UserError, TypeError):
    """A step job's function that a task could not import by name (a lambda, a closure, a method)."""


def function_path(fn: Callable[..., Any], owner: str) -> str:
    """`module:qualname` of a module-level function, as a task imports it. A main run as
    `python -m pkg.mod` names its own module `__main__`: the task imports `pkg.mod` instead."""
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or not qualname or "<" in qualname or "." in qualname:
        raise StepFunctionError(
            f"{owner}: run={fn!r} runs in a step job, which imports it by name; give the step a function "
            "defined at the top level of an importable module (not a lambda, closure or method)"
        )
    if module == "__main__":
        spec = getattr(sys.modules.get("__main__"), "__spec__", None)
        if spec is None or not spec.name:
            raise StepFunctionError(
                f"{owner}: run={qualname} is defined in a script; a step job imports it by module, so run the "
                "experiment as `python -m <package>.<module>`"
            )
        module = spec.name
    return f"{module}:{qualname}"


@dataclass(frozen=True)
class StepInput:
    """One input of a step job: its identity (`name@version:fingerprint`) and where it is stored."""

    identity: str
    uri: str


@dataclass(frozen=True)
class StepJobRequest:
    """What the runner asks the step-job path to run; `config` is the config as built here."""

    identity: str
    name: str
    version: str
    fingerprint: str
    output_path: str
    prefix: str
    function: str
    config: Mapping[str, Any]
    inputs: tuple[StepInput, ...]
    execution: StepExecution
    code: ExperimentCode | None = None


class StepJobs(Protocol):
    """The path a step job takes (the coordinator's backend); returns the artifact's value fields."""

    def run(self, request: StepJobRequest, report: Callable[[str], None]) -> dict[str, Any]: ...
