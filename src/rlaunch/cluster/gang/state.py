"""On-disk layout of local jobs, shared by the backend (any process) and the supervisor.

One directory per job under the root:

    <root>/<job_id>/job.json          what was submitted (written once; never holds env values)
                    state.json        job and replica states, exit codes (the supervisor writes it)
                    supervisor.json   pid + start time of the supervisor, to tell "lost" from "busy"
                    cancel.json       the first cancel request: who, when, why
                    children/<id>     one empty marker per child job
                    logs/job.log      every replica's output, line by line, prefixed `[rank N] `
                    logs/rank-<r>.attempt-<a>.log   one replica attempt's raw output
                    supervisor.log    what the supervisor did (starts, retries, kills)

Every JSON file is replaced atomically (`rlaunch.storage`: write a temporary file, then rename;
local paths never import fsspec), so a reader in another process never sees half a record. `job.json` is written last at submit: a directory
without it is an aborted submission and is ignored.
"""

from __future__ import annotations

import re
import secrets
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlaunch.cluster.lifecycle import cancel_request
from rlaunch.cluster.protocol import JobNotFoundError
from rlaunch.statefiles import require_object
from rlaunch.storage import create_exclusive, dumps, write_json_atomic
from rlaunch.storage import read_json as _read_any

_JOB_ID = re.compile(r"^[a-z0-9][a-z0-9.-]*$")
_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits
_SUFFIX_LENGTH = 6
MAX_JOB_ID = 255  # one directory name: a longer id can name no job (and would fail as ENAMETOOLONG)


def read_json(path: Path) -> dict[str, Any] | None:
    """One of a job's JSON records (None when absent); CorruptStateError naming it and the fix
    when it does not parse or is not an object."""
    return require_object(_read_any(path), str(path))


@dataclass(frozen=True)
class JobDir:
    """Paths of one job's directory; reading and writing goes through here so the layout is in one place."""

    root: Path
    job_id: str

    @property
    def path(self) -> Path:
        return self.root / self.job_id

    @property
    def job_file(self) -> Path:
        return self.path.joinpath("job.json")

    @property
    def state_file(self) -> Path:
        return self.path.joinpath("state.json")

    @property
    def supervisor_file(self) -> Path:
        return self.path.joinpath("supervisor.json")

    @property
    def cancel_file(self) -> Path:
        return self.path.joinpath("cancel.json")

    @property
    def children_dir(self) -> Path:
        return self.path.joinpath("children")

    @property
    def logs_dir(self) -> Path:
        return self.path.joinpath("logs")

    @property
    def combined_log(self) -> Path:
        return self.path.joinpath("logs", "job.log")

    @property
    def supervisor_log(self) -> Path:
        return self.path.joinpath("supervisor.log")

    def attempt_log(self, rank: int, attempt: int) -> Path:
        return self.logs_dir / f"rank-{rank}.attempt-{attempt}.log"

    def read_job(self) -> dict[str, Any]:
        job: dict[str, Any] | None = read_json(self.job_file)
        if job is None:
            raise JobNotFoundError(f"no local job {self.job_id!r} under {self.root}")
        return job

    def read_state(self) -> dict[str, Any]:
        state: dict[str, Any] | None = read_json(self.state_file)
        if state is None:
            raise JobNotFoundError(f"local job {self.job_id!r} under {self.root} has no state.json")
        return state

    def write_state(self, state: dict[str, Any]) -> None:
        write_json_atomic(self.state_file, state)

    def read_cancel(self) -> dict[str, Any] | None:
        return read_json(self.cancel_file)

    def request_cancel(self, reason: str | None) -> None:
        """Ask the job to stop; the first request wins, so the record names who really cancelled."""
        create_exclusive(self.cancel_file, dumps(cancel_request(reason)))

    def add_child(self, child_id: str) -> None:
        self.children_dir.mkdir(exist_ok=True)
        (self.children_dir / child_id).touch()

    def children(self) -> list[str]:
        if not self.children_dir.is_dir():
            return []
        return sorted(p.name for p in self.children_dir.iterdir() if not p.name.startswith("."))


def existing_job(root: Path, job_id: str) -> JobDir:
    """The directory of a submitted job; JobNotFoundError for anything else (including path tricks)."""
    if (
        len(job_id) > MAX_JOB_ID
        or not _JOB_ID.match(job_id)
        or ".." in job_id
        or not (root / job_id / "job.json").is_file()
    ):
        raise JobNotFoundError(f"no local job {job_id!r} under {root} (see `rlaunch jobs list`)")
    return JobDir(root, job_id)


def new_job(root: Path, name: str) -> JobDir:
    """Reserve a fresh `<name>-<6 random chars>` directory; mkdir makes the id unique across processes."""
    root.mkdir(parents=True, exist_ok=True)
    while True:
        suffix = "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(_SUFFIX_LENGTH))
        job = JobDir(root, f"{name}-{suffix}")
        try:
            job.path.mkdir()
        except FileExistsError:
            continue
        job.logs_dir.mkdir()
        return job


def job_ids(root: Path) -> list[str]:
    """Ids of every submitted job under `root` (directories without job.json are aborted submissions)."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "job.json").is_file())
