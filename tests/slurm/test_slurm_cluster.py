"""The tier's own Slurm: two idle nodes with two logical GPUs each, and a step on each node."""

from __future__ import annotations

import pytest

from tests.slurm.slurm_cluster import SlurmCluster

pytestmark = pytest.mark.slurm


def test_two_nodes_run_one_step_each_with_their_gpus(slurm_cluster: SlurmCluster) -> None:
    out = slurm_cluster.command(
        "srun", "-N2", "--gres=gpu:2", "-t", "1", "sh", "-c", 'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"'
    )
    assert sorted(out.split("\n")[:2]) == ["n1 0,1", "n2 0,1"]
