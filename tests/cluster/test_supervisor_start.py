"""A gang supervisor as it starts, in process (`Supervisor.__init__`): it reads its job, scrubs the
secrets of the environment it hands the replicas and the values its submitter passed on, keeps the
gang's rules from the job record, appends to the job's combined log and asks its transport for the
rendezvous once. tests/cluster/test_secrets.py checks a real supervisor's logs."""

from __future__ import annotations

import json
import selectors
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlaunch.cluster.gang.state import JobDir
from rlaunch.cluster.gang.supervisor import Supervisor
from rlaunch.secrets import REDACTED

SUBMITTED = "submitted-value-0123456789"  # a value the submitter knew to be secret
HANDED = "handed-value-9876543210"  # a secret in the environment the replicas get


class _Transport:
    def __init__(self) -> None:
        self.asked = 0

    def gang_rendezvous(self) -> str:
        self.asked += 1
        return "10.0.0.1:29500"


def _job(tmp_path: Path, **record: Any) -> JobDir:
    job = JobDir(tmp_path, "gang-abc123")
    job.logs_dir.mkdir(parents=True)
    fields = {"replicas": 3, "max_retries": 2, "timeout_seconds": 90, "parent": "coord-xyz789", **record}
    job.job_file.write_text(json.dumps(fields))
    job.state_file.write_text(json.dumps({"state": "pending", "replicas": []}))
    job.combined_log.write_bytes(b"earlier line\n")
    return job


@pytest.fixture
def started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Supervisor, _Transport]]:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    transport = _Transport()
    env = {"HF_TOKEN": HANDED, "PATH": "/bin"}
    supervisor = Supervisor(_job(tmp_path), ["python", "-c", "pass"], env, [SUBMITTED], backend=transport)  # type: ignore[arg-type]
    yield supervisor, transport
    supervisor.combined.close()
    supervisor.selector.close()


def test_it_scrubs_what_it_hands_the_replicas_and_what_its_submitter_knew(
    started: tuple[Supervisor, _Transport],
) -> None:
    supervisor, _ = started
    line = f"token {HANDED} and {SUBMITTED} and /bin"
    assert supervisor.scrubber.text(line) == f"token {REDACTED} and {REDACTED} and /bin"


def test_it_keeps_the_job_its_record_and_the_gangs_rules(started: tuple[Supervisor, _Transport]) -> None:
    supervisor, transport = started
    assert (supervisor.argv, supervisor.env["PATH"]) == (["python", "-c", "pass"], "/bin")
    assert supervisor.record["replicas"] == 3 and supervisor.state == {"state": "pending", "replicas": []}
    gang = supervisor.gang
    assert (gang.job_id, len(gang.replicas), gang.max_attempts, gang.timeout, gang.parent) == (
        "gang-abc123",
        3,
        3,
        90.0,
        "coord-xyz789",
    )
    assert [a.rank for a in supervisor.attempts] == [0, 1, 2] and all(a.proc is None for a in supervisor.attempts)
    assert (supervisor.rendezvous, transport.asked, supervisor.signalled) == ("10.0.0.1:29500", 1, None)
    assert supervisor.backend is transport
    assert isinstance(supervisor.selector, selectors.BaseSelector) and not supervisor.selector.get_map()  # none yet


def test_it_appends_to_the_jobs_combined_log(started: tuple[Supervisor, _Transport]) -> None:
    supervisor, _ = started
    supervisor.combined.write(b"new line\n")
    supervisor.combined.flush()
    assert supervisor.job.combined_log.read_bytes() == b"earlier line\nnew line\n"


def test_without_known_values_it_scrubs_its_environments_secrets(tmp_path: Path) -> None:
    supervisor = Supervisor(_job(tmp_path), ["true"], {"HF_TOKEN": HANDED}, backend=_Transport())  # type: ignore[arg-type]
    try:
        assert supervisor.scrubber.text(f"{HANDED} {SUBMITTED}") == f"{REDACTED} {SUBMITTED}"
    finally:
        supervisor.combined.close()
