"""Submitting to a scripted Slurm: sbatch queues the job held, rlaunch writes its records, then
releases it. A job whose records could not be written, or that could not be released, is cancelled
before the error leaves `submit`: a held job nobody can read would wait in the queue forever."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rlaunch.cluster.gang import engine
from rlaunch.cluster.protocol import JobSpec
from rlaunch.cluster.slurm.backend import SlurmBackend
from rlaunch.cluster.slurm.commands import SlurmError
from tests.support.scripted_slurm import FakeSlurm, scripted

SPEC = JobSpec(name="held", argv=["true"])


@pytest.fixture
def slurm(monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    fake = scripted(monkeypatch)
    fake.partitions = ["PartitionName=debug Default=YES MaxTime=60 State=UP Nodes=n1"]
    fake.partition_nodes = {"debug": ["n1|4|8000|(null)|(null)"]}
    return fake


def _disk_full(*_: Any) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def _interrupted(*_: Any) -> None:
    raise KeyboardInterrupt


def test_a_released_job_is_not_cancelled(tmp_path: Path, slurm: FakeSlurm) -> None:
    assert SlurmBackend(root=tmp_path).submit(SPEC) == "100"
    assert slurm.calls[-1] == ["scontrol", "release", "100"] and slurm.scancelled() == []
    assert slurm.queue["100"] == ("PENDING", "None")


@pytest.mark.parametrize(
    ("fault", "raised"),
    [(_disk_full, OSError), (_interrupted, KeyboardInterrupt)],
    ids=["disk-full", "interrupted"],
)
def test_a_held_job_whose_records_failed_to_write_is_cancelled(
    tmp_path: Path, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, fault: Callable[..., None], raised: type
) -> None:
    monkeypatch.setattr(engine, "write_json_atomic", fault)
    with pytest.raises(raised):
        SlurmBackend(root=tmp_path).submit(SPEC)
    assert slurm.scancelled() == [["scancel", "100"]]
    assert ["scontrol", "release", "100"] not in slurm.calls  # never released to run unrecorded


def test_a_held_job_whose_directory_could_not_be_made_is_cancelled(tmp_path: Path, slurm: FakeSlurm) -> None:
    (tmp_path / "100").mkdir()  # left behind by an earlier job under the id Slurm gives again
    with pytest.raises(FileExistsError):
        SlurmBackend(root=tmp_path).submit(SPEC)
    assert slurm.scancelled() == [["scancel", "100"]]


def test_a_held_job_slurm_would_not_release_is_cancelled(tmp_path: Path, slurm: FakeSlurm) -> None:
    slurm.release_refused = "Access/permission denied"
    with pytest.raises(SlurmError, match="Access/permission denied"):
        SlurmBackend(root=tmp_path).submit(SPEC)
    assert slurm.scancelled() == [["scancel", "100"]]
