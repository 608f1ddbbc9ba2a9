"""The preflight of step jobs, run when the graph is planned (the dry run and `--run` alike).

A step job's placement is checked as the RL step's is, before anything is allocated: its runtime
is registered and runs on the devices it asks for, and no node is asked for more accelerators of
a kind than a node of that kind holds. The node width is what the graph's RL steps declare for
that device (`SkyRLTopology.gpus_per_node`); a device no RL step declares is left to the
backend's capacity check, which `--run` applies to every step job before the coordinator is
submitted. An SFT step is sized as a training role is (`rlaunch.training.warm_start.sft_memory`):
its model states alone beyond its device are refused (`memory.model_states`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from rlaunch.artifacts.step import ArtifactStep, graph_handles
from rlaunch.errors import UserError
from rlaunch.step_jobs import StepExecution

if TYPE_CHECKING:
    from rlaunch.rules.memory import MemoryTable


class StepJobPlacementError(UserError, ValueError):
    """A step job that could never run as placed; every problem at once, each naming its field."""


def node_widths(steps: list[ArtifactStep[Any]]) -> dict[str, int]:
    """Accelerators per node, by device name, as the graph's RL steps declare their nodes."""
    if "rlaunch.skyrl.plan.rl_step" not in sys.modules:
        return {}
    from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep

    widths: dict[str, int] = {}
    for step in steps:
        if isinstance(step, SkyRLArtifactStep) and step.spec is not None:
            topology = step.spec.topology
            key = topology.gpu_variant.upper()
            widths[key] = max(widths.get(key, 0), topology.gpus_per_node)
    return widths


def sft_tables(steps: list[ArtifactStep[Any]], prefix: str | None) -> dict[str, MemoryTable]:
    """The memory table of each SFT step of the graph, by identity (none imported when it has none)."""
    if "rlaunch.training.warm_start" not in sys.modules:
        return {}
    from rlaunch.training.warm_start import SftArtifactStep, sft_memory

    return {step.identity: sft_memory(step, prefix) for step in steps if isinstance(step, SftArtifactStep)}


def step_job_problems(handles: list[ArtifactStep[Any]], prefix: str | None = None) -> list[str]:
    steps = graph_handles(handles)
    jobs = [s for s in steps if isinstance(s.execution, StepExecution)]
    if not jobs:
        return []
    from rlaunch.runtimes.registry import UnknownRuntimeError, get_profile

    widths = node_widths(steps)
    problems = []
    for step in jobs:
        execution: StepExecution = step.execution
        if execution.runtime is not None:
            try:
                accelerator = get_profile(execution.runtime).capabilities.accelerator
            except UnknownRuntimeError as exc:
                problems.append(f"{step.identity}: StepExecution.runtime={execution.runtime!r}: {exc}")
                accelerator = None
            if accelerator == "cpu" and execution.accelerators:
                problems.append(
                    f"{step.identity}: StepExecution.accelerators={execution.accelerators} but runtime "
                    f"{execution.runtime!r} runs on CPU: the devices would be held idle; set accelerators=0 or "
                    "choose a GPU runtime"
                )
        if execution.accelerators and execution.accelerator_type:
            width = widths.get(execution.accelerator_type.upper())
            if width is not None and execution.accelerators > width:
                problems.append(
                    f"{step.identity}: StepExecution.accelerators={execution.accelerators} x "
                    f"{execution.accelerator_type} per node, but a node holds {width} (the RL step's "
                    f"gpus_per_node); ask for at most {width} per node and more nodes"
                )
    tables = sft_tables(steps, prefix)
    if tables:
        from rlaunch.training.warm_start import SftArtifactStep, sft_memory_problem

        for step in steps:
            refusal = sft_memory_problem(step, tables[step.identity]) if isinstance(step, SftArtifactStep) else None
            problems += [refusal] if refusal else []
    return problems


def preflight_step_jobs(handles: list[ArtifactStep[Any]], prefix: str | None = None) -> None:
    problems = step_job_problems(handles, prefix)
    if problems:
        raise StepJobPlacementError(
            "step job placement refused before anything is allocated:\n" + "\n".join(f"  - {p}" for p in problems)
        )
