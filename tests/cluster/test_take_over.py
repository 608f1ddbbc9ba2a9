"""A gang job whose supervisor is gone, in process (`GangEngine._take_over`): the engine records the
outcome the supervisor could not (cancelled when a cancel was asked, else failed with the transport's
word), stops the replicas it left running, ends them, and cancels the job's children; on a root it
cannot write, the outcome holds in memory and nothing is stopped further. The transports' real
supervisors are killed in tests/cluster/test_local_gang.py and tests/launch/test_read_only_prefix.py."""

from __future__ import annotations

import errno
import json
import re
from pathlib import Path
from typing import Any

import pytest

from rlaunch.cluster.gang import engine as engine_module
from rlaunch.cluster.gang.engine import GangEngine
from rlaunch.cluster.gang.state import JobDir
from rlaunch.cluster.lifecycle import cancel_message

LOST = "gang-abc123: its supervisor is gone (lost with the machine)"
ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"


class _Transport(GangEngine):
    """A transport whose supervisor is always gone; it remembers what it was asked to stop and cancel."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, kill_grace=0)
        self.stopped: list[list[int]] = []
        self.cancelled: list[tuple[str, str, bool]] = []

    def check(self, *_: Any, **__: Any) -> None: ...
    def environment(self) -> dict[str, str]:
        return {}

    def gang_rendezvous(self) -> str:
        return "localhost:0"

    def replica_command(self, rank: int, argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        return argv, env

    def submit(self, *_: Any, **__: Any) -> str:
        raise NotImplementedError

    def _supervisor_gone(self, job: JobDir, record: dict[str, Any]) -> bool:
        return True

    def _lost_message(self, job: JobDir) -> str:
        return f"{job.job_id}: its supervisor is gone (lost with the machine)"  # the transport's word on this job

    def _stop_left(self, pids: list[int]) -> None:
        self.stopped.append(pids)

    def cancel_children(self, job_id: str, *, reason: str, wait: bool = True) -> None:
        self.cancelled.append((job_id, reason, wait))


def _state() -> dict[str, Any]:
    return {
        "state": "running",
        "message": None,
        "replicas": [
            {"rank": 0, "state": "running", "pid": 101},
            {"rank": 1, "state": "succeeded", "pid": 102, "finished_at": "earlier"},
            {"rank": 2, "state": "pending", "pid": None},
            {"rank": 3, "state": "failed", "pid": 104, "finished_at": "earlier"},
            {"rank": 4, "state": "running", "pid": 105},
        ],
    }


def _job(tmp_path: Path) -> JobDir:
    job = JobDir(tmp_path, "gang-abc123")
    job.path.mkdir()
    return job


def test_a_job_whose_supervisor_is_gone_is_failed_its_replicas_stopped_and_its_children_cancelled(
    tmp_path: Path,
) -> None:
    transport, job = _Transport(tmp_path), _job(tmp_path)
    state = transport._take_over(job, _state())
    assert transport.stopped == [[101, 105]]  # the unfinished replicas that had started
    assert [r["state"] for r in state["replicas"]] == ["failed", "succeeded", "failed", "failed", "failed"]
    assert [r.get("finished_at") for r in state["replicas"]][1::2] == ["earlier", "earlier"]
    assert all(re.match(ISO, state["replicas"][rank]["finished_at"]) for rank in (0, 2, 4))
    assert (state["state"], state["message"], state["cancel"]) == ("failed", LOST, None)
    assert re.match(ISO, state["finished_at"])
    assert json.loads(job.state_file.read_text()) == state  # recorded
    assert transport.cancelled == [("gang-abc123", "parent job gang-abc123 ended (failed)", False)]


def test_a_job_cancelled_before_its_supervisor_went_is_cancelled_by_whoever_asked(tmp_path: Path) -> None:
    transport, job = _Transport(tmp_path), _job(tmp_path)
    job.request_cancel("no longer needed")
    request = job.read_cancel()
    assert request is not None
    state = transport._take_over(job, _state())
    message = cancel_message(request) + " (its supervisor was gone; stopped the replicas directly)"
    assert (state["state"], state["message"], state["cancel"]) == ("cancelled", message, request)
    assert [r["state"] for r in state["replicas"]] == ["cancelled", "succeeded", "cancelled", "failed", "cancelled"]
    assert json.loads(job.state_file.read_text())["state"] == "cancelled"
    assert transport.cancelled == [("gang-abc123", "parent job gang-abc123 ended (cancelled)", False)]


@pytest.mark.parametrize("error", [PermissionError(errno.EACCES, "denied"), OSError(errno.ENOSPC, "full")])
def test_on_a_root_it_cannot_write_the_outcome_holds_in_memory_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: OSError
) -> None:
    transport, job = _Transport(tmp_path), _job(tmp_path)

    def refuse(*_: Any) -> None:
        raise error

    monkeypatch.setattr(engine_module.JobDir, "write_state", refuse)
    state = transport._take_over(job, _state())
    assert (state["state"], state["message"]) == ("failed", LOST)
    assert not job.state_file.exists()
    assert transport.cancelled == []  # a reader does not cancel anything further


def test_any_other_write_error_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    transport, job = _Transport(tmp_path), _job(tmp_path)

    def broken(*_: Any) -> None:
        raise OSError(errno.EIO, "input/output error")

    monkeypatch.setattr(engine_module.JobDir, "write_state", broken)
    with pytest.raises(OSError, match="input/output error"):
        transport._take_over(job, _state())
    assert transport.cancelled == []
