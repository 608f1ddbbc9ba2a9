"""The tier's own Slurm: two idle nodes with two logical GPUs each, a step on each node; and the
one line the tier skips with where Slurm cannot be installed."""

from __future__ import annotations

import pytest

from tests.slurm.slurm_cluster import SlurmCluster


@pytest.mark.slurm
def test_two_nodes_run_one_step_each_with_their_gpus(slurm_cluster: SlurmCluster) -> None:
    out = slurm_cluster.command(
        "srun", "-N2", "--gres=gpu:2", "-t", "1", "sh", "-c", 'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES"'
    )
    assert sorted(out.split("\n")[:2]) == ["n1 0,1", "n2 0,1"]


def test_without_slurm_and_without_root_the_tier_says_in_one_line_why(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.slurm import slurm_cluster

    monkeypatch.setattr(slurm_cluster.shutil, "which", lambda program: None)
    monkeypatch.setattr(slurm_cluster.os, "geteuid", lambda: 1000)
    with pytest.raises(slurm_cluster.SlurmUnavailable) as why:
        slurm_cluster.install()
    assert "\n" not in str(why.value)
    assert str(why.value).startswith("Slurm is not installed (slurmctld, slurmd, munged, sbatch missing)")
    assert "install slurmctld slurmd slurm-client munge" in str(why.value)
