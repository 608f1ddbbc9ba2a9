"""Gang start, the replica environment, names and working directories, against real processes."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from pathlib import Path

import pytest

from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.cluster.protocol import JobSpec, JobState
from tests.support.polling import HANDSHAKE

from .helpers import job_file, py

GANG = """
import json, os
keys = ("RLAUNCH_JOB_ID", "RLAUNCH_REPLICA_RANK", "RLAUNCH_WORLD_SIZE", "RLAUNCH_RENDEZVOUS")
print(json.dumps({k: os.environ[k] for k in keys}))
heard = handshake(20)
if heard is not None:
    print("peer says", heard)
"""


def test_gang_replicas_get_distinct_ranks_one_rendezvous_and_run_together(backend: LocalBackend) -> None:
    job_id = backend.submit(JobSpec(name="gang", argv=py(HANDSHAKE + GANG), replicas=2))
    status = backend.wait(job_id, timeout=30)
    assert status.state == JobState.SUCCEEDED, status

    lines = list(backend.logs(job_id))
    seen = {}
    for rank in (0, 1):
        mine = [line.removeprefix(f"[rank {rank}] ") for line in lines if line.startswith(f"[rank {rank}] ")]
        seen[rank] = json.loads(mine[0])
    assert [seen[r]["RLAUNCH_REPLICA_RANK"] for r in (0, 1)] == ["0", "1"]
    assert {seen[r]["RLAUNCH_WORLD_SIZE"] for r in (0, 1)} == {"2"}
    assert {seen[r]["RLAUNCH_JOB_ID"] for r in (0, 1)} == {job_id}
    rendezvous = {seen[r]["RLAUNCH_RENDEZVOUS"] for r in (0, 1)}
    assert len(rendezvous) == 1 and next(iter(rendezvous)).startswith("127.0.0.1:")
    # Rank 1 reached rank 0's listener on the rendezvous port: both were running at the same time.
    assert "[rank 0] peer says hello from rank 1" in lines
    starts = [datetime.fromisoformat(r.started_at or "") for r in status.replicas]
    assert abs((starts[0] - starts[1]).total_seconds()) < 1.0


def test_replica_environment_is_allow_listed_plus_spec_env(
    backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UNRELATED_SERVICE_TOKEN", "submitter-only-secret-123")
    monkeypatch.setenv("SOME_SUBMITTER_SETTING", "not-for-jobs")
    spec = JobSpec(
        name="env",
        argv=py("""
            import json, os
            print(json.dumps(dict(os.environ)))
            print("hf token arrived:", os.environ.get("HF_TOKEN") == "hf-given-on-purpose-456")
        """),
        env={"VISIBLE_SETTING": "hello", "HF_TOKEN": "hf-given-on-purpose-456"},
    )
    job_id = backend.submit(spec)
    assert backend.wait(job_id, timeout=20).state == JobState.SUCCEEDED
    lines = list(backend.logs(job_id, replica=0))
    env = json.loads(lines[0])

    assert "UNRELATED_SERVICE_TOKEN" not in env and "SOME_SUBMITTER_SETTING" not in env
    assert env["VISIBLE_SETTING"] == "hello"
    assert lines[1] == "hf token arrived: True"
    assert env["HF_TOKEN"] == "<redacted>"  # reached the job, but its value is scrubbed from the logs
    assert env["PATH"] == os.environ["PATH"]
    assert env["RLAUNCH_JOB_ID"] == job_id and env["RLAUNCH_BACKEND"] == "local"
    assert env["RLAUNCH_REPLICA_RANK"] == "0" and env["RLAUNCH_WORLD_SIZE"] == "1"
    assert env["RLAUNCH_LOCAL_ROOT"] == str(backend.root) and env["RLAUNCH_LOCAL_CPUS"] == "4"
    allowed = {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "PYTHONUNBUFFERED",
        "VISIBLE_SETTING",
        "HF_TOKEN",
    }
    assert {k for k in env if k not in allowed and not k.startswith(("LC_", "RLAUNCH_"))} == set()
    # Nothing on disk holds an env value: only the key names are recorded.
    on_disk = "".join(p.read_text() for p in (backend.root / job_id).rglob("*.json"))
    assert "hf-given-on-purpose-456" not in on_disk and "submitter-only-secret-123" not in on_disk
    assert job_file(backend.root, job_id, "job.json")["env_keys"] == ["HF_TOKEN", "VISIBLE_SETTING"]


def test_spec_env_cannot_override_job_variables(backend: LocalBackend) -> None:
    with pytest.raises(ValueError, match="RLAUNCH_REPLICA_RANK"):
        backend.submit(JobSpec(name="liar", argv=py("pass"), env={"RLAUNCH_REPLICA_RANK": "7"}))
    assert backend.list_jobs() == []


def test_job_ids_are_sanitised_unique_and_readable(backend: LocalBackend) -> None:
    spec = JobSpec(name="My_Fancy_Job!!-v2", argv=py("pass"))
    first, second = backend.submit(spec), backend.submit(spec)
    for job_id in (first, second):
        assert re.fullmatch(r"my-fancy-job-v2-[a-z0-9]{6}", job_id)
        assert (backend.root / job_id).is_dir()
        assert backend.wait(job_id, timeout=20).name == "my-fancy-job-v2"
    assert first != second


def test_working_dir_defaults_to_submitters_cwd(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    explicit, cwd = tmp_path / "explicit", tmp_path / "cwd"
    explicit.mkdir()
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    show = py("import os; print(os.getcwd())")
    jobs = {
        backend.submit(JobSpec(name="wd", argv=show, working_dir=str(explicit))): explicit,
        backend.submit(JobSpec(name="wd", argv=show)): cwd,
    }
    for job_id, expected in jobs.items():
        assert backend.wait(job_id, timeout=20).state == JobState.SUCCEEDED
        assert list(backend.logs(job_id)) == [f"[rank 0] {expected}"]


def test_bad_argv_or_working_dir_is_refused_at_submit(backend: LocalBackend, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not on the job's PATH"):
        backend.submit(JobSpec(name="x", argv=("no-such-program-rlaunch",)))
    with pytest.raises(ValueError, match="not a directory"):
        backend.submit(JobSpec(name="x", argv=py("pass"), working_dir=str(tmp_path / "missing")))
    assert backend.list_jobs() == []
