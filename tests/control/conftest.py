"""Runs whose jobs are Slurm jobs of a scripted Slurm (`tests.support.scripted_slurm`), under the test's
isolated prefix: the control commands read and stop them through the real Slurm backend, in process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rlaunch import storage
from rlaunch.cluster import base
from rlaunch.cluster.gang.engine import KILL_GRACE_ENV
from rlaunch.cluster.protocol import JobSpec
from rlaunch.cluster.slurm.backend import SlurmBackend
from rlaunch.runs import run_record
from tests.support.scripted_slurm import FakeSlurm, fresh_answers, pending_job, scripted

RUN = "marker/rl@1"


@pytest.fixture
def slurm(prefix: str, monkeypatch: pytest.MonkeyPatch) -> FakeSlurm:
    """A scripted Slurm whose every answer is fresh, and a cancel that waits no longer than one look."""
    fake = scripted(monkeypatch)
    fresh_answers(monkeypatch)
    monkeypatch.setattr(base, "CANCEL_EXTRA_SECONDS", 0.0)
    monkeypatch.setenv(KILL_GRACE_ENV, "0")
    return fake


def jobs_root(prefix: str) -> Path:
    """Where the Slurm backend keeps the jobs of a local prefix, and where a cancel looks for them."""
    return Path(prefix) / ".slurm-jobs"


def output_path(prefix: str, run: str = RUN) -> str:
    name, _, version = run.partition("@")
    return storage.join(prefix, name, version)


def coordinator(prefix: str, slurm: FakeSlurm, job_id: str = "77", run: str = RUN) -> None:
    """A coordinator job labelled with `run`, waiting in the queue."""
    labels = {"rlaunch.kind": "coordinator", "rlaunch.artifact": run}
    spec = JobSpec(name=f"coordinator-{job_id}", argv=["true"], labels=labels)
    pending_job(SlurmBackend(root=jobs_root(prefix)), job_id, spec)
    slurm.queue[job_id] = ("PENDING", "Priority")


def record_attempt(prefix: str, attempt_id: str = "a1", **fields: Any) -> None:
    """The attempt as the RL step records it: its artifact, its Slurm placement, running."""
    placement = {"root": str(jobs_root(prefix))}
    entry = {"artifact": RUN, "backend": "slurm", "placement": placement, "state": "running", **fields}
    run_record.update_attempt(output_path(prefix), "r1", attempt_id, entry)


def attempt(prefix: str, attempt_id: str = "a1") -> dict[str, Any]:
    record = run_record.read(output_path(prefix)) or {}
    return next(a for a in record.get("attempts") or [] if a.get("attempt_id") == attempt_id)
