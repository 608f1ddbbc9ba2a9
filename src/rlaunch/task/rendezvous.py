"""The gang's rendezvous: how rank 0 tells the other ranks where its Ray head is, and how it ends.

A small protocol with two exchanges, both published by rank 0 (the head) and awaited by the
other ranks (the workers):

  head record   {gang_epoch, attempt_id, job_id, head_host, address, port, num_nodes,
                 python_version, ray_version, written_at}: where to join. The head publishes it
                once Ray is up and re-publishes it (fresh `written_at`) every few seconds for as
                long as it runs: that is its heartbeat.
  outcome       {gang_epoch, exit_code, state, reason, written_at}: how the run ended. A worker
                parks until the outcome of *its* epoch appears, then leaves with its exit code.

Workers also publish a node record (rank, host, address, pid, state, reason) when they join and
when they leave, so a stopped gang says what each rank was doing.

What makes a head record current (`current_head`): the same attempt and job as the worker, and
written no more than `STALE_AFTER_SECONDS` before the worker started (clock skew allowed). A
record left by an earlier gang (an earlier attempt, a retried job, a crashed head) fails one of
these and is ignored: the worker keeps waiting for its own head. The gang epoch (a fresh uuid per
head incarnation) ties the outcome to the head record the worker joined.

Implementations: `StorageRendezvous`, files in the attempt's rendezvous directory on the shared
prefix (any fsspec URL):

    <attempts_root>/<attempt_id>/rendezvous/
        head.json                  the head record (rewritten on every heartbeat)
        outcome.json               the outcome of the current epoch
        nodes/rank-<N>.json        each worker's node record

A backend with its own rendezvous (Iris endpoints) implements the same five primitives
(`clear`, `publish_head`, `read_head`, `publish_outcome`, `read_outcome`, plus `publish_node`)
and gets the waiting rules below for free; it may override `wait_for_head` / `wait_for_outcome`
when it can block natively. `rendezvous_for` picks the implementation for a document.
"""

from __future__ import annotations

import abc
import datetime
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from rlaunch import storage
from rlaunch.cluster.protocol import BACKEND_ENV, JOB_ID_ENV
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.runs.layout import attempt_dir
from rlaunch.waiting import WaitTimeout, wait_until

RENDEZVOUS_DIR = "rendezvous"
HEAD_FILE = "head.json"
OUTCOME_FILE = "outcome.json"
NODES_DIR = "nodes"
STALE_AFTER_SECONDS = 60.0  # a head record older than this when a worker starts is an earlier gang's
POLL_SECONDS = 0.5


class RendezvousTimeout(RuntimeError):
    """A rank waited for another longer than the document allows; the message names the rank."""


class GangStopped(RuntimeError):
    """A wait was interrupted because this rank is being stopped (a signal)."""


def _parse_time(text: str) -> float:
    return datetime.datetime.fromisoformat(text).timestamp()


@dataclass(frozen=True)
class HeadRecord:
    gang_epoch: str
    attempt_id: str
    job_id: str | None
    head_host: str
    address: str  # the head node's IP, as Ray knows it
    port: int  # the GCS port
    num_nodes: int
    python_version: str
    ray_version: str
    written_at: str

    @property
    def gcs_address(self) -> str:
        return f"{self.address}:{self.port}"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HeadRecord:
        values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(cls)}  # JSON: a missing key reads None
        return cls(**values)


@dataclass(frozen=True)
class GangOutcome:
    gang_epoch: str
    exit_code: int
    state: str  # succeeded | failed | timed_out | terminated
    reason: str | None
    written_at: str

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> GangOutcome:
        values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(cls)}  # JSON: a missing key reads None
        return cls(**values)


def current_head(
    record: HeadRecord | None, *, attempt_id: str, job_id: str | None, started_at: float
) -> HeadRecord | None:
    """`record` when it belongs to this gang (see the module docstring), else None."""
    if record is None or record.attempt_id != attempt_id:
        return None
    if job_id and record.job_id and record.job_id != job_id:
        return None
    try:
        written = _parse_time(record.written_at)
    except (TypeError, ValueError):
        return None
    return record if written >= started_at - STALE_AFTER_SECONDS else None


class Rendezvous(abc.ABC):
    """Where the head publishes and the workers wait; see the module docstring."""

    @abc.abstractmethod
    def clear(self) -> None:
        """Remove the records of earlier gangs (the head calls it before publishing)."""

    @abc.abstractmethod
    def publish_head(self, record: HeadRecord) -> None: ...

    @abc.abstractmethod
    def read_head(self) -> HeadRecord | None: ...

    @abc.abstractmethod
    def publish_outcome(self, outcome: GangOutcome) -> None: ...

    @abc.abstractmethod
    def read_outcome(self) -> GangOutcome | None: ...

    @abc.abstractmethod
    def publish_node(self, rank: int, record: dict[str, Any]) -> None:
        """A worker's own record (joined, left and why)."""

    def wait_for_head(
        self,
        *,
        attempt_id: str,
        job_id: str | None,
        started_at: float,
        timeout: float,
        rank: int,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> HeadRecord:
        """The current head record; RendezvousTimeout naming rank 0 after `timeout` seconds."""

        def head() -> HeadRecord | None:
            record = current_head(self.read_head(), attempt_id=attempt_id, job_id=job_id, started_at=started_at)
            if record is None and should_stop():
                raise GangStopped(f"rank {rank} was stopped while waiting for rank 0's head record")
            return record

        try:
            return wait_until(head, timeout, "rank 0's head record", POLL_SECONDS)
        except WaitTimeout:
            raise RendezvousTimeout(
                f"rank {rank} waited {timeout:g}s (ray.rendezvous_timeout_seconds) for rank 0 to publish its "
                f"Ray head record at {self.describe()}, and rank 0 never did: rank 0 is missing (did it "
                "start? see its log); raise ray.rendezvous_timeout_seconds if it is only slow to stage"
            ) from None

    def wait_for_outcome(
        self,
        head: HeadRecord,
        *,
        rank: int,
        head_silence: float,
        should_stop: Callable[[], bool] = lambda: False,
    ) -> GangOutcome:
        """Rank 0's outcome for `head`'s epoch. No limit while rank 0 keeps its heartbeat; fails
        naming rank 0 once its record has not been refreshed for `head_silence` seconds, or when a
        new head (another epoch) replaced it."""
        latest, last_beat = head, time.monotonic()  # the newest head record seen, and when it changed

        def outcome() -> GangOutcome | None:
            nonlocal latest, last_beat
            found = self.read_outcome()
            if found is not None and found.gang_epoch == head.gang_epoch:
                return found
            if should_stop():
                raise GangStopped(f"rank {rank} was stopped while parked on rank 0's outcome")
            now = time.monotonic()
            current = self.read_head()
            if current is not None and current.gang_epoch != head.gang_epoch:
                raise RendezvousTimeout(
                    f"rank {rank}: rank 0 was replaced (epoch {head.gang_epoch} -> {current.gang_epoch}) "
                    "without an outcome for the gang this rank joined"
                )
            if current is not None and current.written_at != latest.written_at:
                latest, last_beat = current, now
            elif now - last_beat > head_silence:
                raise RendezvousTimeout(
                    f"rank {rank}: rank 0 ({latest.head_host}) stopped refreshing its head record "
                    f"{head_silence:g}s ago and wrote no outcome: rank 0 is missing (see its log)"
                )
            return None

        return wait_until(outcome, None, "rank 0's outcome", POLL_SECONDS)  # no limit while rank 0 beats

    def describe(self) -> str:
        return type(self).__name__


class StorageRendezvous(Rendezvous):
    """The rendezvous as files under a directory on the shared prefix (any fsspec URL)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def _url(self, *parts: str) -> str:
        return storage.join(self.directory, *parts)

    def clear(self) -> None:
        for name in (HEAD_FILE, OUTCOME_FILE):
            if storage.exists(self._url(name)):
                storage.remove(self._url(name))

    def publish_head(self, record: HeadRecord) -> None:
        storage.write_json_atomic(self._url(HEAD_FILE), asdict(record))

    def read_head(self) -> HeadRecord | None:
        data = storage.read_json(self._url(HEAD_FILE))
        return HeadRecord.from_json(data) if isinstance(data, dict) else None

    def publish_outcome(self, outcome: GangOutcome) -> None:
        storage.write_json_atomic(self._url(OUTCOME_FILE), asdict(outcome))

    def read_outcome(self) -> GangOutcome | None:
        data = storage.read_json(self._url(OUTCOME_FILE))
        return GangOutcome.from_json(data) if isinstance(data, dict) else None

    def publish_node(self, rank: int, record: dict[str, Any]) -> None:
        storage.write_json_atomic(self._url(NODES_DIR, f"rank-{rank}.json"), {"rank": rank, **record})

    def describe(self) -> str:
        return self._url(HEAD_FILE)


def rendezvous_dir(doc: SkyRLLaunchConfig) -> str:
    return storage.join(attempt_dir(doc.artifacts.attempts_root, doc.run.attempt_id), RENDEZVOUS_DIR)


def rendezvous_for(doc: SkyRLLaunchConfig) -> Rendezvous:
    """The rendezvous a gang uses: on Iris, the head record through Iris's endpoint registry
    (`iris_rendezvous`); everywhere else, files on the shared prefix."""
    job_id = os.environ.get(JOB_ID_ENV)
    if os.environ.get(BACKEND_ENV) == "iris" and job_id:
        from rlaunch.task.iris_rendezvous import IrisEndpointRendezvous

        return IrisEndpointRendezvous(rendezvous_dir(doc), job_id)
    return StorageRendezvous(rendezvous_dir(doc))
