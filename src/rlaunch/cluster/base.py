"""What every backend does the same way, written once: a new backend writes only its transport.

`GangBackend` implements the protocol's `submit_child`, `wait`, `cancel` (the cascade to every
descendant) and `list_jobs` (oldest first) over a few transport hooks:

    _ended(job_id)             the job's gang driver is gone (its outcome is recorded)
    _request_cancel(ids, why)  record who cancelled and why (the first request wins)
    _stop(ids)                 make those jobs stop now (a backend whose drivers watch their
                               cancel requests needs nothing here)
    _child_lookup()            job id -> its children's ids
    _statuses()                every job's status, in any order
    _replica_count(id)         how many replicas the job has (JobNotFoundError when none)
    _log_lines(id, query)      the job's combined log, read as `query` asks (see `logs`)
"""

from __future__ import annotations

import abc
import contextlib
import os
from collections.abc import Callable, Iterator

from rlaunch.cluster.combined_log import LogQuery
from rlaunch.cluster.lifecycle import parent_cancelled_reason
from rlaunch.cluster.protocol import (
    JOB_ID_ENV,
    RANK_ENV,
    RENDEZVOUS_ENV,
    WORLD_SIZE_ENV,
    JobNotFoundError,
    JobSpec,
    JobStatus,
)
from rlaunch.secrets import Scrubber
from rlaunch.waiting import WaitTimeout, wait_until

MAX_POLL = 1.0  # the longest pause between two looks at a job that is still running
FIRST_POLL = 0.05
CANCEL_EXTRA_SECONDS = 15.0  # beyond the kill grace: how long `cancel` waits for the jobs to end


def descendants(job_id: str, children: Callable[[str], list[str]]) -> list[str]:
    """Every job below `job_id`, nearest first."""
    found: list[str] = []
    frontier = [job_id]
    while frontier:
        frontier = [c for j in frontier for c in children(j) if c not in found]
        found.extend(frontier)
    return found


class GangBackend(abc.ABC):
    """The protocol's shared half; subclasses set `name` and `kill_grace` and implement the hooks."""

    name: str
    kill_grace: float
    owned_variables: tuple[str, ...] = ()  # what the transport sets per replica beyond the protocol's

    # -- the transport's part --------------------------------------------------------------------

    @abc.abstractmethod
    def environment(self) -> dict[str, str]: ...

    @abc.abstractmethod
    def status(self, job_id: str) -> JobStatus: ...

    @abc.abstractmethod
    def submit(self, spec: JobSpec, *, parent: str | None = None) -> str: ...

    @abc.abstractmethod
    def _ended(self, job_id: str) -> bool: ...

    @abc.abstractmethod
    def _request_cancel(self, job_ids: list[str], reason: str | None) -> None: ...

    def _stop(self, job_ids: list[str]) -> None:
        return None

    @abc.abstractmethod
    def _child_lookup(self) -> Callable[[str], list[str]]: ...

    @abc.abstractmethod
    def _statuses(self) -> list[JobStatus]: ...

    @abc.abstractmethod
    def _replica_count(self, job_id: str) -> int: ...

    @abc.abstractmethod
    def _log_lines(self, job_id: str, query: LogQuery) -> Iterator[str]: ...

    # -- shared behaviour ------------------------------------------------------------------------

    def submit_child(self, spec: JobSpec) -> str:
        parent = os.environ.get(JOB_ID_ENV)
        if not parent:
            raise RuntimeError(f"submit_child needs ${JOB_ID_ENV}: call it from inside a running job, or use submit()")
        return self.submit(spec, parent=parent)

    def _check_spec_env(self, spec: JobSpec) -> None:
        """A job may not set the variables the backend owns: they would lie about rank or job id."""
        owned = {*self.environment(), JOB_ID_ENV, WORLD_SIZE_ENV, RANK_ENV, RENDEZVOUS_ENV, *self.owned_variables}
        clashes = sorted(set(spec.env) & owned)
        if clashes:
            raise ValueError(
                f"JobSpec.env sets {clashes}, which the {self.name} backend sets for every replica; remove them"
            )

    def _check_live_parent(self, parent: str) -> None:
        """A child is submitted only under a parent that exists and has not ended."""
        try:
            status = self.status(parent)
        except JobNotFoundError as exc:
            raise JobNotFoundError(f"parent job: {exc}") from None
        if status.state.terminal:
            raise ValueError(f"parent job {parent} already ended ({status.state.value}); a child cannot outlive it")

    def wait(self, job_id: str, timeout: float | None = None) -> JobStatus:
        """The job's status once it has ended, or as it is after `timeout` seconds."""
        with contextlib.suppress(WaitTimeout):
            self._wait_ended(lambda: self._ended(job_id), timeout, f"job {job_id} to end")
        return self.status(job_id)

    @staticmethod
    def _wait_ended(done: Callable[[], bool], timeout: float | None, what: str) -> None:
        """A growing pause (50 ms up to a second) between looks at jobs that are still running."""
        wait_until(done, timeout, what, FIRST_POLL, max_interval=MAX_POLL)

    def cancel(self, job_id: str, *, reason: str | None = None) -> JobStatus:
        """Stop the job and every descendant, then wait until they have all ended."""
        self.status(job_id)  # JobNotFoundError for an unknown id
        below = descendants(job_id, self._child_lookup())
        self._request_cancel([job_id], reason)
        self._request_cancel(below, parent_cancelled_reason(job_id, reason))
        self._stop([job_id, *below])
        self._await_ended([job_id, *below])
        return self.status(job_id)

    def _await_ended(self, job_ids: list[str]) -> None:
        pending = list(job_ids)

        def all_ended() -> bool:
            pending[:] = [j for j in pending if not self._ended(j)]
            return not pending

        with contextlib.suppress(WaitTimeout):  # what has not ended by then shows in the returned status
            self._wait_ended(all_ended, self.kill_grace + CANCEL_EXTRA_SECONDS, f"jobs {', '.join(job_ids)} to end")

    def logs(
        self, job_id: str, *, replica: int | None = None, follow: bool = False, tail: int | None = None
    ) -> Iterator[str]:
        """The job's log as `_log_lines` reads it, scrubbed of this reader's own secrets as well (a
        value the job's writer never knew, e.g. one the job read from a file, is still not shown)."""
        replicas = self._replica_count(job_id)
        query = LogQuery.checked(job_id, replicas, replica, follow, tail, lambda: self._ended(job_id))
        scrubber = Scrubber.for_process()
        return (scrubber.text(line) for line in self._log_lines(job_id, query))

    def list_jobs(self) -> list[JobStatus]:
        return sorted(self._statuses(), key=lambda s: (s.submitted_at or "", s.job_id))
