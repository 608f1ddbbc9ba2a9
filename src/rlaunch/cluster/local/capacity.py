"""What this machine declares it has, and the per-job check against it.

This is not a scheduler: a job is refused only when it could never fit the machine on its own
(per-replica need x replicas > declared total). Jobs that fit run at once, side by side, so a
coordinator and the child job it launches can both run. Accelerators default to none: a job
asking for GPUs on a machine nobody declared GPUs for is a mistake to catch before it starts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from rlaunch.cluster.protocol import CapacityError, JobSpec, Resources
from rlaunch.units import format_size, parse_size

CPUS_ENV = "RLAUNCH_LOCAL_CPUS"
ACCELERATORS_ENV = "RLAUNCH_LOCAL_ACCELERATORS"
MEMORY_ENV = "RLAUNCH_LOCAL_MEMORY"


def env_number(env: Mapping[str, str], name: str, kind: type[float] | type[int]) -> float | int | None:
    """The number in `env[name]` (None when unset), with an error that names the variable."""
    raw = env.get(name)
    if not raw:
        return None
    try:
        return kind(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not {'an integer' if kind is int else 'a number'}") from None


def _machine_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


@dataclass(frozen=True)
class Machine:
    """Declared totals: constructor arguments, else the environment, else what the OS reports."""

    cpus: float
    accelerators: int
    memory_bytes: int

    @classmethod
    def declared(
        cls,
        cpus: float | None = None,
        accelerators: int | None = None,
        memory: int | str | None = None,
        env: Mapping[str, str] = os.environ,
    ) -> Machine:
        if cpus is None:
            declared_cpus = env_number(env, CPUS_ENV, float)
            cpus = float(os.cpu_count() or 1) if declared_cpus is None else declared_cpus
        if accelerators is None:
            accelerators = int(env_number(env, ACCELERATORS_ENV, int) or 0)
        if memory is None:
            memory = env.get(MEMORY_ENV) or _machine_memory()
        memory_bytes = parse_size(memory, field=MEMORY_ENV)
        if cpus <= 0 or accelerators < 0:
            raise ValueError(
                f"declared capacity cpus={cpus}, accelerators={accelerators}: cpus must be positive, accelerators >= 0"
            )
        return cls(cpus=cpus, accelerators=accelerators, memory_bytes=memory_bytes)

    def environment(self) -> dict[str, str]:
        """The declaration as variables, so a backend rebuilt inside a job declares the same machine."""
        return {
            CPUS_ENV: f"{self.cpus:g}",
            ACCELERATORS_ENV: str(self.accelerators),
            MEMORY_ENV: str(self.memory_bytes),
        }


def check_fits(spec: JobSpec, machine: Machine) -> None:
    """Raise CapacityError naming each shortfall, the declaration, and how to change it."""
    res, n = spec.resources, spec.replicas
    per = f"per replica x {n} replica{'s' if n != 1 else ''}"
    problems: list[str] = []
    if res.cpu * n > machine.cpus:
        problems.append(
            f"CPUs: needs {res.cpu * n:g} ({res.cpu:g} {per}) but this machine declares {machine.cpus:g}; "
            f"change the declaration with {CPUS_ENV}=<n> or LocalBackend(cpus=...)"
        )
    if res.accelerators * n > machine.accelerators:
        kind = f" {res.accelerator_type}" if res.accelerator_type else ""
        problems.append(
            f"accelerators: needs {res.accelerators * n}{kind} ({res.accelerators} {per}) but this machine "
            f"declares {machine.accelerators}; declare them with {ACCELERATORS_ENV}=<n> "
            "or LocalBackend(accelerators=...)"
        )
    if res.memory_bytes is not None and res.memory_bytes * n > machine.memory_bytes:
        problems.append(
            f"memory: needs {format_size(res.memory_bytes * n)} ({format_size(res.memory_bytes)} {per}) but this "
            f"machine declares {format_size(machine.memory_bytes)}; change it with {MEMORY_ENV}=<size, e.g. 64GB> "
            f"or LocalBackend(memory=...)"
        )
    if problems:
        raise CapacityError(f"job {spec.name!r} does not fit the local machine:\n  " + "\n  ".join(problems))


def at_once(spec: JobSpec, machine: Machine, beside: Resources | None = None) -> int:
    """How many copies of `spec` fit this machine side by side (`beside` a job already running, a
    coordinator): what a sweep's coordinator may run at once, so its variants queue rather than
    oversubscribe the declaration; at least 1 (a job that fits alone was judged by `check_fits`)."""
    res, n = spec.resources, spec.replicas
    free_cpus = machine.cpus - (beside.cpu if beside else 0.0)
    counts = [int(free_cpus // (res.cpu * n))]
    if res.accelerators:
        counts.append(machine.accelerators // (res.accelerators * n))
    if res.memory_bytes:
        free_memory = machine.memory_bytes - ((beside.memory_bytes or 0) if beside else 0)
        counts.append(free_memory // (res.memory_bytes * n))
    return max(1, min(counts))
