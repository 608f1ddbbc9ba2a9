"""Capacity: a job that can never fit the declared machine is refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.cluster.local.capacity import Machine, at_once
from rlaunch.cluster.protocol import CapacityError, JobSpec, Resources


def spec(resources: Resources, replicas: int = 1) -> JobSpec:
    return JobSpec(name="big", argv=("true",), resources=resources, replicas=replicas)


def test_cpu_refusal_names_need_declaration_and_the_fix(root: Path) -> None:
    backend = LocalBackend(root, cpus=2)
    with pytest.raises(CapacityError) as refused:
        backend.submit(spec(Resources(cpu=2), replicas=2))
    message = str(refused.value)
    assert "job 'big' does not fit" in message
    assert "needs 4 (2 per replica x 2 replicas) but this machine declares 2" in message
    assert "RLAUNCH_LOCAL_CPUS" in message and "LocalBackend(cpus=...)" in message
    assert not root.exists() or not any(root.iterdir())  # nothing was written or started


def test_accelerators_default_to_none_declared(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RLAUNCH_LOCAL_ACCELERATORS", raising=False)
    with pytest.raises(
        CapacityError, match=r"needs 8 H100 .* declares 0; declare them with RLAUNCH_LOCAL_ACCELERATORS"
    ):
        LocalBackend(root).submit(spec(Resources(accelerators=8, accelerator_type="H100")))


def test_memory_and_several_shortfalls_in_one_message(root: Path) -> None:
    backend = LocalBackend(root, cpus=1, memory="1GB")
    with pytest.raises(CapacityError) as refused:
        backend.submit(spec(Resources(cpu=2, memory_bytes=2 * 10**9)))
    message = str(refused.value)
    assert "CPUs: needs 2" in message
    assert "memory: needs 2GB (2GB per replica x 1 replica) but this machine declares 1GB" in message
    assert "RLAUNCH_LOCAL_MEMORY" in message


def test_declaration_comes_from_arguments_then_environment(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLAUNCH_LOCAL_CPUS", "64")
    monkeypatch.setenv("RLAUNCH_LOCAL_ACCELERATORS", "8")
    monkeypatch.setenv("RLAUNCH_LOCAL_MEMORY", "512GiB")
    from_env = LocalBackend(root)
    assert (from_env.machine.cpus, from_env.machine.accelerators, from_env.machine.memory_bytes) == (64, 8, 512 * 2**30)
    env = from_env.environment()
    assert env["RLAUNCH_LOCAL_CPUS"] == "64" and env["RLAUNCH_LOCAL_ACCELERATORS"] == "8"
    with pytest.raises(CapacityError, match="declares 1;"):
        LocalBackend(root, cpus=1).submit(spec(Resources(cpu=2)))


def test_bad_declarations_are_clear_errors(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLAUNCH_LOCAL_MEMORY", "lots")
    with pytest.raises(ValueError, match="RLAUNCH_LOCAL_MEMORY='lots' is not a size"):
        LocalBackend(root)
    with pytest.raises(ValueError, match="cpus must be positive"):
        LocalBackend(root, cpus=0, memory="1GB")


# --- how many of one gang fit side by side (a sweep's variants queue beyond it) -----------------

COORDINATOR = Resources(cpu=1, memory_bytes=2 * 10**9)


@pytest.mark.parametrize(
    ("cpus", "accelerators", "memory", "gang", "replicas", "fit"),
    [
        (3, 0, "64GB", Resources(cpu=1), 1, 2),  # two beside the coordinator
        (2.99, 0, "64GB", Resources(cpu=1), 1, 1),  # a CPU short of two
        (2, 0, "64GB", Resources(cpu=1), 1, 1),  # the CPU smoke on a 2-CPU machine: one at a time
        (9, 0, "64GB", Resources(cpu=1), 2, 4),  # two replicas each
        (64, 16, "1TB", Resources(cpu=1, accelerators=8), 1, 2),  # the accelerators bound it
        (64, 0, "10GB", Resources(cpu=1, memory_bytes=4 * 10**9), 1, 2),  # 8 GB left beside 2 GB: two of 4 GB
        (64, 0, "9999999999", Resources(cpu=1, memory_bytes=4 * 10**9), 1, 1),  # one byte short of two
        (1, 0, "64GB", Resources(cpu=1), 1, 1),  # none fits beside it: still one (the check refuses what never fits)
    ],
)
def test_at_once_counts_the_gangs_that_fit_beside_the_coordinator(
    cpus: float, accelerators: int, memory: str, gang: Resources, replicas: int, fit: int
) -> None:
    machine = Machine.declared(cpus=cpus, accelerators=accelerators, memory=memory, env={})
    assert at_once(spec(gang, replicas), machine, COORDINATOR) == fit
