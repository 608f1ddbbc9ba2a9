"""The queue check on a partition as Slurm prints it (`scontrol show partition -o`, `sinfo -N`),
scripted in process: a partition that is not UP refuses every job, in each of Slurm's other states,
and a gang fits only where enough single nodes each offer everything one replica asks for."""

from __future__ import annotations

import pytest

from rlaunch.cluster.protocol import JobSpec, Resources
from rlaunch.cluster.slurm.queue_check import read_partition, violations
from rlaunch.placement import SlurmPlacement
from tests.support.scripted_slurm import FakeSlurm, scripted

GPU_NODE = "g1|16|64000|gpu:4(S:0-1)|ib"
CPU_NODE = "c1|32|128000|(null)|(null)"


@pytest.fixture
def slurm(monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    return scripted(monkeypatch)


def partition(slurm: FakeSlurm, state: str = "UP", nodes: tuple[str, ...] = (GPU_NODE, CPU_NODE)) -> None:
    """Partition `mixed` (the default) in `state`, holding `nodes`."""
    names = ",".join(row.split("|")[0] for row in nodes)
    slurm.partitions = [
        "PartitionName=debug AllowAccounts=ALL Default=NO MaxNodes=UNLIMITED MaxTime=UNLIMITED State=UP Nodes=x1",
        f"PartitionName=mixed AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL Default=YES MaxNodes=UNLIMITED "
        f"MaxTime=60 State={state} Nodes={names}",
    ]
    slurm.partition_nodes = {"mixed": list(nodes), "debug": ["x1|1|1000|(null)|(null)"]}


def checked(nodes: int, gpus: int = 0, cpu: float = 1.0) -> list[str]:
    spec = JobSpec(name="j", argv=("x",), replicas=nodes, resources=Resources(cpu=cpu, accelerators=gpus))
    return violations(spec, SlurmPlacement(), read_partition(None))


@pytest.mark.parametrize("state", ["DOWN", "DRAIN", "INACTIVE"])
def test_a_partition_that_is_not_up_refuses_a_job_that_would_otherwise_fit(slurm: FakeSlurm, state: str) -> None:
    partition(slurm, state)
    assert checked(1) == [f"partition mixed is {state}, not UP: choose another partition or ask the admins"]


def test_an_up_partition_refuses_nothing_that_fits(slurm: FakeSlurm) -> None:
    partition(slurm)
    assert checked(1) == []


def test_a_two_node_gpu_job_does_not_fit_one_gpu_node_beside_a_cpu_only_node(slurm: FakeSlurm) -> None:
    partition(slurm)
    assert checked(2, gpus=4) == [
        "the job needs 2 node(s) with 1 CPU(s), 4 x gpu each but partition mixed has 1 such node(s) "
        "[g1 (16 CPUs, 64000 MB, gpu:4(S:0-1)), c1 (32 CPUs, 128000 MB, (null))]: lower num_nodes or the "
        "per-node size, or choose a larger partition"
    ]


@pytest.mark.parametrize(("nodes", "gpus"), [(1, 4), (2, 0)])
def test_the_gpu_node_alone_holds_one_gpu_replica_and_both_nodes_hold_cpu_replicas(
    slurm: FakeSlurm, nodes: int, gpus: int
) -> None:
    partition(slurm)
    assert checked(nodes, gpus=gpus) == []


def test_two_gpu_nodes_hold_the_two_node_gpu_job(slurm: FakeSlurm) -> None:
    partition(slurm, nodes=(GPU_NODE, GPU_NODE.replace("g1", "g2", 1)))
    assert checked(2, gpus=4) == []
