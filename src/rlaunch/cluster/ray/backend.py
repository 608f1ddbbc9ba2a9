"""`RayBackend`: rlaunch jobs on an existing Ray cluster, through the Ray Jobs API.

Every rlaunch job is one Ray job whose entrypoint is the gang driver followed by the job's argv
(`python -m rlaunch.cluster.ray.job_driver -- ARGV`, built with `shlex.join`; callers only ever give
argv lists). The Ray submission id *is* the rlaunch job id (`<sanitised name>-<6 chars>`).

  submit    refuses what can never fit (see `capacity`) after checking the cluster answers, then
            submits. A top-level single-replica job (a coordinator) holds entrypoint resources
            (CPU, memory, GPUs) and runs its replica inside the driver's process tree; a child job
            or any multi-replica gang holds a placement group, one bundle per replica. runtime_env:
            the working_dir (uploaded once; children reuse the package), pip / py_executable when
            set, and env_vars = spec.env + the backend's RLAUNCH_RAY_* variables.
  status    the Jobs API (job state, exit code, metadata: name, parent, labels) joined with the
            driver's record in the internal KV (per-replica state, attempts, exit codes).
  logs      the Jobs API log: `[rank N]` lines, filtered per rank; follow streams it.
  cancel    records who cancelled and why, stops the job and every descendant (stop_job), and
            waits until Ray reports them all ended; child drivers also stop when their parent ends.

The address is `address=`, else $RAY_ADDRESS, else $RLAUNCH_RAY_ADDRESS: a dashboard URL
(`http://head:8265`) or the GCS address (`head:6379`, which also gives replica detail from
outside the cluster). Inside a job, `from_env()` rebuilds the same backend from the variables
`environment()` forwarded, and talks to the cluster through its GCS address (valid on every node,
unlike a port-forwarded dashboard URL).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import socket
import string
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from urllib.parse import urlparse

from rlaunch.cluster.base import GangBackend
from rlaunch.cluster.combined_log import LogQuery
from rlaunch.cluster.lifecycle import cancel_message, cancel_request, replica_status
from rlaunch.cluster.protocol import (
    BACKEND_ENV,
    JOB_ID_ENV,
    BackendUnavailableError,
    JobNotFoundError,
    JobSpec,
    JobState,
    JobStatus,
    Resources,
    dependency_problem,
)
from rlaunch.cluster.ray.capacity import (
    Fit,
    Node,
    auto_strategy,
    bundle_for,
    check_fits,
    check_fits_beside,
    fetch_nodes,
)
from rlaunch.cluster.ray.contract import (
    ADDRESS_ENV,
    CHECK_CAPACITY_ENV,
    ENTRYPOINT,
    EXCLUDES_ENV,
    EXIT_CANCELLED,
    GANG_ENV,
    GCS_ADDRESS_ENV,
    KILL_GRACE_ENV,
    META_LABELS,
    META_NAME,
    META_PARENT,
    META_PLACEMENT,
    META_PRIORITY,
    META_REPLICAS,
    META_RESOURCES,
    META_SUBMITTED_AT,
    META_SUBMITTED_BY,
    NODE_ID_ENV,
    NODE_IP_ENV,
    OUTCOME_PREFIX,
    PIP_ENV,
    PLACEMENT_GROUP,
    PRIORITY_ENV,
    PY_EXECUTABLE_ENV,
    STRATEGY_ENV,
    WORKING_DIR_ENV,
    dumps,
    env_flag,
)
from rlaunch.cluster.ray.kv import StatusStore, split_host_port
from rlaunch.errors import UserError
from rlaunch.placement import RayPlacement
from rlaunch.processes import actor
from rlaunch.storage import utc_from_epoch, utc_now

INSTALL_HINT = "pip install 'rlaunch[ray]'"
DRIVER_MODULE = "rlaunch.cluster.ray.job_driver"
DEFAULT_KILL_GRACE = 5.0
REACH_TIMEOUT = 5.0
STORE_RETRY_SECONDS = 30.0
_SUFFIX_ALPHABET = string.ascii_lowercase + string.digits
_TERMINAL_RAY = ("STOPPED", "SUCCEEDED", "FAILED")


class RayNotInstalledError(UserError, ImportError):
    """The ray backend was chosen but Ray is not installed here."""


class RayClusterUnreachableError(UserError, ConnectionError):
    """Nothing answers at the Ray address."""


def require_ray() -> None:
    if problem := dependency_problem("ray"):  # the words the dry run says too
        raise RayNotInstalledError(problem)
    try:
        import ray.job_submission  # noqa: F401
    except ImportError as exc:
        raise RayNotInstalledError(
            f"the ray backend needs Ray, which does not import here ({exc}): {INSTALL_HINT}"
        ) from None


def _iso_ms(epoch_ms: int | None) -> str | None:
    return utc_from_epoch(epoch_ms / 1000) if epoch_ms else None


def _is_url(address: str) -> bool:
    return "://" in address


def _gcs_from(address: str | None) -> str | None:
    """A `host:port` address is the GCS itself; a URL or "auto" is not."""
    return None if not address or _is_url(address) or address == "auto" else address


def _host_port(address: str) -> tuple[str, int] | None:
    if address == "auto":
        return None
    if _is_url(address):
        parsed = urlparse(address)
        if parsed.scheme == "ray":
            raise ValueError(
                f"Ray address {address!r} is a Ray Client address; the ray backend uses the Jobs API: give the "
                "dashboard URL (http://<head>:8265) or the GCS address (<head>:6379)"
            )
        if not parsed.hostname:
            raise ValueError(f"Ray address {address!r} has no host")
        return parsed.hostname, parsed.port or (443 if parsed.scheme == "https" else 80)
    return split_host_port(address)


def _outcome_line(text: str | None) -> str | None:
    """The driver's last `[rlaunch] job <state>: <why>` line, from Ray's failure message."""
    if not text:
        return None
    found = [line for line in text.splitlines() if line.startswith(OUTCOME_PREFIX)]
    if not found:
        return None
    _, _, why = found[-1].removeprefix(OUTCOME_PREFIX).partition(": ")
    return why or None


class RayBackend(GangBackend):
    """Ray Jobs API backend. Every option is forwarded into jobs, so a job's children run alike."""

    name = "ray"
    owned_variables = (GANG_ENV, NODE_ID_ENV, NODE_IP_ENV)

    def __init__(
        self,
        address: str | None = None,
        *,
        gcs_address: str | None = None,
        working_dir: str | None = None,
        excludes: tuple[str, ...] = (),
        py_executable: str | None = None,
        pip: tuple[str, ...] = (),
        strategy: str = "auto",
        check_capacity: bool = True,
        kill_grace: float | None = None,
        priority: str | None = None,
    ) -> None:
        require_ray()
        address = address or os.environ.get("RAY_ADDRESS") or os.environ.get(ADDRESS_ENV) or gcs_address
        if not address:
            raise BackendUnavailableError(
                "the ray backend needs the cluster's address: pass address=... (RaySkyRLExecution(address=...)) "
                "or set RAY_ADDRESS=http://<head>:8265 (the dashboard) or <head>:6379 (the GCS)"
            )
        placement = RayPlacement(
            address=address,
            working_dir=working_dir,
            excludes=excludes,
            py_executable=py_executable,
            pip=pip,
            strategy=strategy,
            check_capacity=check_capacity,
            priority=priority,
            owner="RayBackend",
        )
        _host_port(address)  # refuses a malformed address now
        if kill_grace is None:
            configured = os.environ.get(KILL_GRACE_ENV)
            kill_grace = float(configured) if configured else DEFAULT_KILL_GRACE
        if kill_grace < 0:
            raise ValueError(f"kill_grace={kill_grace} cannot be negative")
        self.address = address
        self.gcs_address = gcs_address or os.environ.get(GCS_ADDRESS_ENV) or _gcs_from(address)
        self.working_dir = placement.working_dir
        self.excludes = placement.excludes
        self.py_executable = placement.py_executable
        self.pip = placement.pip
        self.strategy = placement.strategy
        self.check_capacity = placement.check_capacity
        self.kill_grace = float(kill_grace)
        self.priority = placement.priority
        self._jobs_address = address  # what the Jobs API client connects to (from_env: the GCS)
        self._client: Any = None
        self._store: StatusStore | None = None
        self._store_checked_at: float | None = None

    @classmethod
    def from_env(cls) -> RayBackend:
        """Inside a job: the backend that started it, reached through the cluster's GCS address."""
        env = os.environ
        kill_grace = env.get(KILL_GRACE_ENV)
        backend = cls(
            address=env.get(ADDRESS_ENV) or None,
            gcs_address=env.get(GCS_ADDRESS_ENV) or None,
            working_dir=env.get(WORKING_DIR_ENV) or None,
            excludes=tuple(json.loads(env.get(EXCLUDES_ENV) or "[]")),
            py_executable=env.get(PY_EXECUTABLE_ENV) or None,
            pip=tuple(json.loads(env.get(PIP_ENV) or "[]")),
            strategy=env.get(STRATEGY_ENV) or "auto",
            check_capacity=env_flag(env, CHECK_CAPACITY_ENV, True),
            kill_grace=float(kill_grace) if kill_grace else None,
            priority=env.get(PRIORITY_ENV) or None,
        )
        if backend.gcs_address:
            backend._jobs_address = backend.gcs_address
        return backend

    def environment(self) -> dict[str, str]:
        env = {
            BACKEND_ENV: self.name,
            ADDRESS_ENV: self.address,
            STRATEGY_ENV: self.strategy,
            CHECK_CAPACITY_ENV: "1" if self.check_capacity else "0",
            KILL_GRACE_ENV: f"{self.kill_grace:g}",
        }
        optional = {
            GCS_ADDRESS_ENV: self.gcs_address,
            WORKING_DIR_ENV: self.working_dir,
            EXCLUDES_ENV: json.dumps(list(self.excludes)) if self.excludes else None,
            PY_EXECUTABLE_ENV: self.py_executable,
            PIP_ENV: json.dumps(list(self.pip)) if self.pip else None,
            PRIORITY_ENV: self.priority,
        }
        env.update({k: v for k, v in optional.items() if v})
        return env

    # -- connections ----------------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The Jobs API client; the first use checks that the cluster answers."""
        if self._client is None:
            from ray.job_submission import JobSubmissionClient

            target = _host_port(self._jobs_address)
            if target is not None:
                try:
                    socket.create_connection(target, timeout=REACH_TIMEOUT).close()
                except OSError as exc:
                    raise RayClusterUnreachableError(
                        f"cannot reach the Ray cluster at {self._jobs_address} ({exc}); is it running, and is the "
                        "address right? (RAY_ADDRESS / RaySkyRLExecution(address=...))"
                    ) from None
            try:
                self._client = JobSubmissionClient(self._jobs_address)
            except Exception as exc:  # noqa: BLE001 - ray raises several kinds for "not a Ray cluster"
                raise RayClusterUnreachableError(
                    f"cannot use the Ray Jobs API at {self._jobs_address}: {exc}"
                ) from None
        return self._client

    def _status_store(self) -> StatusStore | None:
        """The KV holding replica detail; None when the GCS address is unknown or unreachable."""
        if self._store is not None:
            return self._store
        now = time.monotonic()
        if self._store_checked_at is not None and now - self._store_checked_at < STORE_RETRY_SECONDS:
            return None
        self._store_checked_at = now
        try:
            self._store = StatusStore.connect(self.gcs_address)
        except Exception:  # noqa: BLE001 - replica detail is optional
            self._store = None
        return self._store

    # -- submitting ----------------------------------------------------------------------------

    def submit(self, spec: JobSpec, *, parent: str | None = None) -> str:
        self._check_spec_env(spec)
        if parent is not None:
            self._check_live_parent(parent)
        placement = PLACEMENT_GROUP if parent is not None or spec.replicas > 1 else ENTRYPOINT
        client = self.client
        fit = self._fit(spec, parent, placement)
        runtime_env = self._runtime_env(spec)
        working_dir = os.path.abspath(spec.working_dir) if spec.working_dir else None
        submitted_env = {**spec.env, **self.environment()}
        gang = {
            "name": spec.name,
            "replicas": spec.replicas,
            "placement": placement,
            "strategy": fit.strategy,
            "bundle": fit.bundle,
            "resources": dict(vars(spec.resources)),
            "max_retries": spec.max_retries,
            "timeout_seconds": spec.timeout_seconds,
            "kill_grace": self.kill_grace,
            "parent": parent,
            "env_names": sorted(submitted_env),
            "working_dir": working_dir,
        }
        metadata = {
            META_NAME: spec.name,
            META_PARENT: parent or "",
            META_LABELS: dumps(dict(spec.labels)),
            META_REPLICAS: str(spec.replicas),
            META_RESOURCES: dumps(dict(vars(spec.resources))),
            META_PLACEMENT: placement,
            META_SUBMITTED_AT: utc_now(),
            META_SUBMITTED_BY: dumps(actor()),
            META_PRIORITY: self.priority or "",
        }
        resources: dict[str, Any] = {}
        if placement == ENTRYPOINT:
            resources["entrypoint_num_cpus"] = fit.bundle["CPU"]
            if "memory" in fit.bundle:
                resources["entrypoint_memory"] = int(fit.bundle["memory"])
            if "GPU" in fit.bundle:
                resources["entrypoint_num_gpus"] = fit.bundle["GPU"]
            custom = {k: v for k, v in fit.bundle.items() if k not in ("CPU", "GPU", "memory")}
            if custom:
                resources["entrypoint_resources"] = custom
        entrypoint = shlex.join([self._python(), "-m", DRIVER_MODULE, "--", *self._cluster_argv(spec.argv)])
        for _ in range(3):
            job_id = f"{spec.name}-{''.join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(6))}"
            env_vars = {**submitted_env, JOB_ID_ENV: job_id, GANG_ENV: dumps(gang)}
            try:
                return str(
                    client.submit_job(
                        entrypoint=entrypoint,
                        runtime_env={**runtime_env, "env_vars": env_vars},
                        metadata=metadata,
                        submission_id=job_id,
                        **resources,
                    )
                )
            except RuntimeError as exc:
                if "already exists" not in str(exc):
                    raise RuntimeError(f"the Ray Jobs API refused job {spec.name!r}: {exc}") from None
        raise RuntimeError(f"could not find a free job id for {spec.name!r}")

    def check(self, spec: JobSpec, *, parent: str | None = None, beside: Resources | None = None) -> str:
        """Raise CapacityError when `spec` could never be placed; returns the strategy it would use.

        What `submit` does first, callable on its own: an RL launcher can refuse a plan whose child
        gang cannot fit *before* submitting its coordinator, passing the coordinator's resources as
        `beside` (they are held while the child runs). Checks regardless of `check_capacity`.
        """
        placement = PLACEMENT_GROUP if parent is not None or spec.replicas > 1 or beside is not None else ENTRYPOINT
        if beside is None:
            return self._fit(spec, parent, placement, force=True).strategy
        strategy = "PACK" if placement == ENTRYPOINT else self.strategy
        nodes = self._nodes()
        return check_fits_beside(
            spec, beside, nodes, strategy=strategy, cluster=f"the Ray cluster at {self.address}"
        ).strategy

    def _nodes(self) -> list[Node]:
        try:
            return fetch_nodes(self.client.get_address())
        except RayClusterUnreachableError:
            raise
        except Exception as exc:  # noqa: BLE001 - the state API failed in one of several ways
            raise RayClusterUnreachableError(
                f"cannot read the nodes of the Ray cluster at {self.address}: {exc}"
            ) from None

    def _fit(self, spec: JobSpec, parent: str | None, placement: str, force: bool = False) -> Fit:
        strategy = "PACK" if placement == ENTRYPOINT else self.strategy
        try:
            nodes = self._nodes()
        except RayClusterUnreachableError:
            if self.check_capacity or force:
                raise
            return Fit(strategy="PACK" if strategy == "auto" else strategy, bundle=bundle_for(spec.resources))
        if not (self.check_capacity or force):
            chosen = auto_strategy(spec, nodes) if strategy == "auto" else strategy
            return Fit(strategy=chosen, bundle=bundle_for(spec.resources))
        reserved = self._held_by_ancestors(parent) if parent else {}
        return check_fits(
            spec, nodes, strategy=strategy, reserved=reserved, cluster=f"the Ray cluster at {self.address}"
        )

    def _held_by_ancestors(self, parent: str) -> dict[str, dict[str, float]]:
        """Entrypoint resources the job's ancestors hold (on their driver's node) while it runs."""
        held: dict[str, dict[str, float]] = {}
        seen: set[str] = set()
        current: str | None = parent
        while current and current not in seen:
            seen.add(current)
            try:
                info = self.client.get_job_info(current)
            except Exception:  # noqa: BLE001 - an ancestor we cannot read holds nothing we know of
                break
            meta = info.metadata or {}
            if meta.get(META_PLACEMENT) == ENTRYPOINT and info.driver_node_id and meta.get(META_RESOURCES):
                resources = Resources(**json.loads(meta[META_RESOURCES]))
                node = held.setdefault(info.driver_node_id, {})
                for key, amount in bundle_for(resources).items():
                    node[key] = node.get(key, 0.0) + amount
            current = meta.get(META_PARENT) or None
        return held

    def _python(self) -> str:
        """The interpreter rlaunch runs with on the cluster (see RaySkyRLExecution.py_executable)."""
        if self.py_executable:
            return self.py_executable
        return "python" if self.pip else sys.executable

    def _cluster_argv(self, argv: Sequence[str]) -> list[str]:
        """The job's argv with this interpreter swapped for the cluster's, when they differ."""
        out = list(argv)
        if out[0] == sys.executable:
            out[0] = self._python()
        return out

    def _runtime_env(self, spec: JobSpec) -> dict[str, Any]:
        env: dict[str, Any] = {}
        if self.working_dir:
            if _is_url(self.working_dir):
                env["working_dir"] = self.working_dir  # an uploaded package (a parent's) or a remote zip
            else:
                path = os.path.abspath(os.path.expanduser(self.working_dir))
                if not os.path.isdir(path):
                    raise ValueError(f"working_dir {self.working_dir!r} is not a directory (resolved to {path})")
                env["working_dir"] = path
                if self.excludes:
                    env["excludes"] = list(self.excludes)
        if self.pip:
            env["pip"] = list(self.pip)
        if self.py_executable:
            env["py_executable"] = self.py_executable
        return env

    # -- inspecting ----------------------------------------------------------------------------

    def _info(self, job_id: str) -> Any:
        try:
            info = self.client.get_job_info(job_id)
        except RuntimeError as exc:
            if "does not exist" in str(exc) or "404" in str(exc):
                raise JobNotFoundError(f"no rlaunch job {job_id!r} on the Ray cluster at {self.address}") from None
            raise
        if META_NAME not in (info.metadata or {}):
            raise JobNotFoundError(f"Ray job {job_id!r} at {self.address} was not submitted by rlaunch")
        return info

    def _state(self, info: Any, record: dict[str, Any] | None, store_known: bool) -> tuple[JobState, str | None]:
        """The job's state: the driver's record while it is authoritative, else what Ray knows."""
        ray_state = info.status.value
        if record is not None and JobState(record["state"]).terminal:
            return JobState(record["state"]), record.get("message")
        if ray_state == "PENDING":
            return JobState.PENDING, None
        if ray_state == "RUNNING":
            if record is not None:
                return JobState(record["state"]), record.get("message")
            return (JobState.PENDING if store_known else JobState.RUNNING), None
        # Ray says the driver is gone but it did not record an outcome (stopped hard, or crashed).
        if ray_state == "STOPPED" or info.driver_exit_code == EXIT_CANCELLED:
            request = self._cancel_request(info.submission_id)
            why = _outcome_line(info.message)
            return JobState.CANCELLED, cancel_message(request) if request else (
                why or "stopped through the Ray Jobs API"
            )
        if ray_state == "SUCCEEDED":
            return JobState.SUCCEEDED, None
        return JobState.FAILED, _outcome_line(info.message) or (info.message or "the Ray job failed").strip()[-2000:]

    def _cancel_request(self, job_id: str) -> dict[str, Any] | None:
        store = self._status_store()
        if store is None:
            return None
        try:
            return store.cancel_request(job_id)
        except Exception:  # noqa: BLE001
            return None

    def _records(self, job_ids: list[str]) -> tuple[dict[str, dict[str, Any]], bool]:
        store = self._status_store()
        if store is None:
            return {}, False
        try:
            return store.states(job_ids), True
        except Exception:  # noqa: BLE001 - the GCS is briefly unreachable: answer from the Jobs API
            return {}, False

    def _build(self, info: Any, record: dict[str, Any] | None, store_known: bool, children: list[str]) -> JobStatus:
        meta = info.metadata or {}
        replicas = int(meta.get(META_REPLICAS) or 1)
        state, message = self._state(info, record, store_known)
        rows = (record or {}).get("replicas") or [
            {"rank": r, "state": JobState.PENDING.value, "attempts": 0} for r in range(replicas)
        ]
        statuses = [replica_status(row, state, _iso_ms(info.end_time)) for row in rows]
        finished = (record or {}).get("finished_at") if record and JobState(record["state"]).terminal else None
        return JobStatus(
            job_id=info.submission_id,
            name=meta.get(META_NAME, info.submission_id),
            backend=self.name,
            state=state,
            replicas=tuple(statuses),
            parent=meta.get(META_PARENT) or None,
            children=tuple(children),
            submitted_at=meta.get(META_SUBMITTED_AT) or _iso_ms(info.start_time),
            started_at=(record or {}).get("started_at"),
            finished_at=finished or (_iso_ms(info.end_time) if state.terminal else None),
            message=message,
            labels=json.loads(meta.get(META_LABELS) or "{}"),
        )

    def _rlaunch_jobs(self) -> list[Any]:
        return [job for job in self.client.list_jobs() if META_NAME in (job.metadata or {}) and job.submission_id]

    def status(self, job_id: str) -> JobStatus:
        info = self._info(job_id)
        records, known = self._records([job_id])
        children = self._children_by_parent(self._rlaunch_jobs()).get(job_id, [])
        return self._build(info, records.get(job_id), known, children)

    def _ended(self, job_id: str) -> bool:
        """Ray reports the job's driver gone (the driver records its outcome before it exits)."""
        return bool(self._info(job_id).status.value in _TERMINAL_RAY)

    def _replica_count(self, job_id: str) -> int:
        return int((self._info(job_id).metadata or {}).get(META_REPLICAS) or 1)

    def _log_lines(self, job_id: str, query: LogQuery) -> Iterator[str]:
        from rlaunch.cluster.ray.logs import read_logs

        return read_logs(self.client, job_id, query)

    def _statuses(self) -> list[JobStatus]:
        jobs = self._rlaunch_jobs()
        records, known = self._records([j.submission_id for j in jobs])
        children = self._children_by_parent(jobs)
        return [self._build(j, records.get(j.submission_id), known, children.get(j.submission_id, [])) for j in jobs]

    @staticmethod
    def _children_by_parent(jobs: list[Any]) -> dict[str, list[str]]:
        children: dict[str, list[str]] = {}
        for job in jobs:
            parent = (job.metadata or {}).get(META_PARENT)
            if parent:
                children.setdefault(parent, []).append(job.submission_id)
        return {parent: sorted(ids) for parent, ids in children.items()}

    # -- stopping ------------------------------------------------------------------------------

    def _request_cancel(self, job_ids: list[str], reason: str | None) -> None:
        """Record who cancelled and why next to each job (the cancel itself goes through the Jobs API)."""
        store = self._status_store()
        if store is None:
            return
        record = cancel_request(reason)
        for job_id in job_ids:
            with contextlib.suppress(Exception):
                store.request_cancel(job_id, record)

    def _stop(self, job_ids: list[str]) -> None:
        for job_id in job_ids:
            try:
                if not self._ended(job_id):
                    self.client.stop_job(job_id)
            except (JobNotFoundError, RuntimeError):
                continue  # gone meanwhile

    def _child_lookup(self) -> Callable[[str], list[str]]:
        children = self._children_by_parent(self._rlaunch_jobs())
        return lambda job_id: children.get(job_id, [])
