"""The rendezvous rules and the document's `ray` section, without Ray (fast)."""

from __future__ import annotations

import datetime
import time
from dataclasses import replace
from pathlib import Path

import pytest

from rlaunch.launch_config.schema import RaySection
from rlaunch.task.rendezvous import GangOutcome, HeadRecord, RendezvousTimeout, StorageRendezvous, current_head


def _iso(seconds_ago: float) -> str:
    moment = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds_ago)
    return moment.isoformat(timespec="milliseconds")


def head(**changes: object) -> HeadRecord:
    record = HeadRecord(
        gang_epoch="e1",
        attempt_id="a1",
        job_id="job-1",
        head_host="node-a",
        address="10.0.0.1",
        port=6379,
        num_nodes=2,
        python_version="3.12.1",
        ray_version="2.60.0",
        written_at=_iso(0),
    )
    return replace(record, **changes)  # type: ignore[arg-type]


def test_current_head_accepts_only_this_gangs_fresh_record() -> None:
    now = time.time()
    assert current_head(head(), attempt_id="a1", job_id="job-1", started_at=now) is not None
    assert current_head(head(), attempt_id="a1", job_id=None, started_at=now) is not None
    assert current_head(head(attempt_id="a0"), attempt_id="a1", job_id="job-1", started_at=now) is None
    assert current_head(head(job_id="job-0"), attempt_id="a1", job_id="job-1", started_at=now) is None
    assert current_head(head(written_at=_iso(3600)), attempt_id="a1", job_id="job-1", started_at=now) is None
    assert current_head(head(written_at="garbage"), attempt_id="a1", job_id="job-1", started_at=now) is None
    assert current_head(None, attempt_id="a1", job_id="job-1", started_at=now) is None


def test_a_worker_ignores_a_stale_record_and_names_rank_0_when_none_comes(tmp_path: Path) -> None:
    store = StorageRendezvous(str(tmp_path / "rendezvous"))
    store.publish_head(head(written_at=_iso(3600)))  # an earlier gang's head, long gone
    with pytest.raises(RendezvousTimeout, match=r"rank 1 waited 1s .*rank 0 is missing"):
        store.wait_for_head(attempt_id="a1", job_id="job-1", started_at=time.time(), timeout=1, rank=1)
    fresh = head(gang_epoch="e2")
    store.publish_head(fresh)
    got = store.wait_for_head(attempt_id="a1", job_id="job-1", started_at=time.time(), timeout=1, rank=1)
    assert got == fresh


def test_outcome_is_taken_only_for_the_joined_epoch_and_a_silent_head_is_named(tmp_path: Path) -> None:
    store = StorageRendezvous(str(tmp_path))
    joined = head(gang_epoch="e2")
    store.publish_head(joined)
    store.publish_outcome(GangOutcome("e1", 0, "succeeded", None, _iso(0)))  # another epoch's outcome
    with pytest.raises(RendezvousTimeout, match=r"rank 1: rank 0 \(node-a\) stopped refreshing"):
        store.wait_for_outcome(joined, rank=1, head_silence=1)
    store.publish_outcome(GangOutcome("e2", 3, "failed", "driver exited 3", _iso(0)))
    assert store.wait_for_outcome(joined, rank=1, head_silence=1).exit_code == 3
    store.publish_head(head(gang_epoch="e3"))
    store.clear()
    assert store.read_head() is None and store.read_outcome() is None


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"port": 0}, "ray.port=0 is not a TCP port"),
        ({"cluster_join_timeout_seconds": 0}, "ray.cluster_join_timeout_seconds=0 must be positive"),
        ({"rendezvous_timeout_seconds": -1}, "ray.rendezvous_timeout_seconds=-1 must be positive"),
        ({"driver_liveness_timeout_seconds": -5}, "0 disables the watchdog"),
        ({"spill_dir": "relative/spill"}, "must be an absolute node-local path"),
        ({"spill_dir": "s3://bucket/spill"}, "must be an absolute node-local path"),
    ],
)
def test_ray_section_refuses_bad_values_naming_the_field(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RaySection(**changes)  # type: ignore[arg-type]
    assert RaySection(driver_liveness_timeout_seconds=0, spill_dir="/tmp/spill").spill_dir == "/tmp/spill"
