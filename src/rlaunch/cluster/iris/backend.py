"""`IrisBackend`: rlaunch jobs as Iris jobs, through the Iris client.

Every rlaunch job is one Iris job whose `replicas` are its tasks; the Iris job id (wire form,
`/<user>/<name>` and `/<user>/<parent>/<child>` for a child) *is* the rlaunch job id, so
`iris job logs <id>` works on what `rlaunch jobs` lists.

  submit    refuses what the cluster can never place (`check`: the scale groups of the cluster
            config, or the controller's; with only a controller URL, a gang whose group has no live
            slice, so no slice size the controller shows, is cancelled and refused as soon as the
            autoscaler's first routing of it says no group can ever hold it), then submits one Iris job:
            entrypoint Iris's `python` running `task.BOOTSTRAP`, which starts the replica wrapper
            `rlaunch.cluster.iris.task` with this backend's interpreter (the interpreter, the job's
            argv, environment and working directory travel as one JSON variable, so that Iris
            rewrites no path under /tmp; the wrapper gives the job the allow-listed environment,
            the RLAUNCH_* variables, the endpoint rendezvous); resources
            per task (cpu, memory, disk, device = GPU variant x count); replicas with
            coscheduling for a gang; both retry limits from `max_retries` (per task, and the job's
            cumulative failures = max_retries x replicas: Iris fails a job on its first failed
            attempt unless both are set);
            the priority band; a scheduling timeout; the job timeout. Environment: `spec.env` plus
            the backend's variables, Iris's credential inheritance off (only rlaunch's allow-list
            crosses). From inside a task (`submit_child`), Iris makes the job a child of the task's
            job: cancelling the parent cancels it, and it ends when the parent fails.
  status    the Iris job status and its tasks (per-task state, attempts, exit code).
  logs      the tasks' log lines from Iris (`[rank N]`-prefixed), never a child job's.
  cancel    Iris terminates the job and its descendants (Iris keeps no reason).

`submit_child`, `wait`, `cancel`, `logs` and `list_jobs` are the shared `GangBackend` half.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import string
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from rlaunch.cluster.base import GangBackend
from rlaunch.cluster.combined_log import LogQuery, pick_lines, rank_prefix
from rlaunch.cluster.iris import PRIORITIES
from rlaunch.cluster.iris.connect import (
    IrisConnectionError,
    ScaleGroup,
    in_task_controller,
    load_cluster_config,
    require_iris,
    resolve_controller_url,
    scale_groups,
)
from rlaunch.cluster.iris.task import BOOTSTRAP, JOB_ENV, PORT_NAMES, encode_job
from rlaunch.cluster.protocol import (
    BACKEND_ENV,
    CapacityError,
    JobNotFoundError,
    JobSpec,
    JobState,
    JobStatus,
    ReplicaStatus,
    Resources,
)
from rlaunch.names import MAX_JOB_NAME, check_name
from rlaunch.waiting import WaitTimeout, wait_until

URL_ENV = "RLAUNCH_IRIS_CONTROLLER_URL"
URL_ENV_USER = "IRIS_CONTROLLER_URL"  # what a person sets (the experiments and `rlaunch jobs` read it)
CONFIG_ENV = "RLAUNCH_IRIS_CLUSTER_CONFIG"
PRIORITY_ENV = "RLAUNCH_IRIS_PRIORITY"
SCHEDULING_TIMEOUT_ENV = "RLAUNCH_IRIS_SCHEDULING_TIMEOUT"
LABELS_ENV = "RLAUNCH_LABELS"
COSCHEDULE_BY = "device-variant"  # every worker of a slice shares it; the autoscaler sizes the slice
DEFAULT_SCHEDULING_TIMEOUT = 600.0
UNKNOWN = 0  # a scale group's VMs per slice that the controller has not shown (no live slice)
ROUTING_WAIT = 30.0  # at most three evaluations of a production autoscaler (every 10 s)
AUTOSCALER_HINT = "Autoscaler:"  # how Iris's pending reason gives the autoscaler's verdict on a job
UNMET = "Unsatisfied autoscaler demand: "
NEVER_PLACED = ("coschedule_mismatch", "no_matching_group", "insufficient_resources")  # Iris's routing reasons
_SUFFIX = string.ascii_lowercase + string.digits

_STATES = {
    "pending": JobState.PENDING,
    "building": JobState.PENDING,
    "assigned": JobState.PENDING,
    "preempted": JobState.PENDING,  # retried while the preemption budget lasts
    "unspecified": JobState.PENDING,
    "running": JobState.RUNNING,
    "succeeded": JobState.SUCCEEDED,
    "failed": JobState.FAILED,
    "worker_failed": JobState.FAILED,
    "unschedulable": JobState.FAILED,
    "cosched_failed": JobState.FAILED,
    "missing": JobState.FAILED,
    "killed": JobState.CANCELLED,
}


def iris_job_name(name: str) -> str:
    """An Iris job name component: a name (`rlaunch.names`: no `/`, no whitespace, not empty) and
    never an integer (that reads as a task index)."""
    check_name(name, field="Iris job name", max_length=MAX_JOB_NAME)
    return f"job-{name}" if name.isdigit() else name


def _iso(timestamp: Any) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp.epoch_ms() / 1000, UTC).isoformat(timespec="milliseconds")


def _state(value: Any) -> JobState:
    return _STATES.get(str(value.value if hasattr(value, "value") else value), JobState.PENDING)


class IrisBackend(GangBackend):
    """Iris through its client. Options are forwarded into jobs, so a job's children run alike."""

    name = "iris"
    kill_grace = 15.0  # how long Iris may take to report a terminated job's tasks ended
    owned_variables = (JOB_ENV,)

    def __init__(
        self,
        controller_url: str | None = None,
        *,
        cluster_config: str | None = None,
        cluster: str | None = None,
        target_cluster: str | None = None,
        parent_cluster_config: str | None = None,
        priority: str | None = None,
        scheduling_timeout_seconds: float | None = None,
        python: str | None = None,
    ) -> None:
        require_iris()
        if target_cluster is not None or parent_cluster_config is not None:
            raise IrisConnectionError(
                "IrisSkyRLExecution(target_cluster=...) hands the run to a federated peer, which this rlaunch does "
                "not submit through; point cluster_config (or controller_url) at the target cluster itself"
            )
        if priority is not None and priority not in PRIORITIES:
            raise ValueError(f"priority={priority!r}: choose one of {list(PRIORITIES)} (or None to inherit)")
        timeout = scheduling_timeout_seconds
        if timeout is None:
            configured = os.environ.get(SCHEDULING_TIMEOUT_ENV)
            timeout = float(configured) if configured else DEFAULT_SCHEDULING_TIMEOUT
        if timeout <= 0:
            raise ValueError(f"scheduling_timeout_seconds={timeout} must be positive")
        self.cluster = cluster
        self.cluster_config = cluster_config
        self.priority = priority
        self.scheduling_timeout = float(timeout)
        self.python = python or sys.executable
        self._resources = contextlib.ExitStack()
        self._groups: tuple[ScaleGroup, ...] | None = None
        config = load_cluster_config(cluster_config) if cluster_config else None
        if config is not None:
            self._groups = scale_groups(config)
        url = controller_url or in_task_controller() or (None if config else os.environ.get(URL_ENV_USER))
        if url is None and config is not None and cluster_config is not None:
            url = resolve_controller_url(config, cluster_config, self._resources)
        if not url:
            raise IrisConnectionError(
                "the iris backend needs a controller: IrisSkyRLExecution(controller_url='http://host:port') or "
                "cluster_config='<cluster.yaml>', or $IRIS_CONTROLLER_URL (`rlaunch jobs --backend iris "
                "--controller-url URL`); start a local cluster with `iris --config <cluster.yaml> cluster start --local`"
            )
        self.controller_url = url
        self._client: Any = None

    @classmethod
    def from_env(cls) -> IrisBackend:
        """Inside a job: the controller that runs it, with the options its submitter forwarded."""
        timeout = os.environ.get(SCHEDULING_TIMEOUT_ENV)
        config = os.environ.get(CONFIG_ENV)
        return cls(
            in_task_controller() or os.environ.get(URL_ENV),
            cluster_config=config if config and os.path.isfile(config) else None,
            priority=os.environ.get(PRIORITY_ENV) or None,
            scheduling_timeout_seconds=float(timeout) if timeout else None,
        )

    def environment(self) -> dict[str, str]:
        env = {
            BACKEND_ENV: self.name,
            URL_ENV: self.controller_url,
            SCHEDULING_TIMEOUT_ENV: f"{self.scheduling_timeout:g}",
        }
        if self.priority:
            env[PRIORITY_ENV] = self.priority
        if self.cluster_config:
            env[CONFIG_ENV] = os.path.abspath(self.cluster_config)
        return env

    @property
    def client(self) -> Any:
        """The Iris client; the first use checks that the controller answers."""
        if self._client is None:
            from iris.client import IrisClient

            for logger in ("finelog", "finelog.client.log_client"):  # one INFO line per log query otherwise
                logging.getLogger(logger).setLevel(logging.WARNING)
            client = IrisClient.remote(self.controller_url, workspace=None, timeout_ms=10000)
            try:
                client.list_jobs(limit=1)
            except Exception as exc:  # noqa: BLE001 - connect errors come in several kinds
                raise IrisConnectionError(
                    f"cannot reach the Iris controller at {self.controller_url} ({exc}); is the cluster running?"
                ) from None
            self._client = client
        return self._client

    # -- checking ------------------------------------------------------------------------------

    def check(self, spec: JobSpec, *, parent: str | None = None, beside: Resources | None = None) -> None:
        """Raise CapacityError when no scale group could ever place `spec` (nothing is submitted)."""
        self._check_groups(spec)

    def _check_groups(self, spec: JobSpec) -> bool:
        """Raise CapacityError when no scale group could ever place `spec`; False when that depends
        on a slice size the controller has not shown.

        The scale groups are the cluster config's, else the controller's (its autoscaler reports
        each group's device, and the VMs of each live slice, but no slice size of a group with no
        live slice, nor VM capacity). A gang of N tasks is coscheduled on one slice, so it needs a
        matching group whose slices have N VMs. The reasons are Iris's own.
        """
        groups = self._groups if self._groups is not None else self._reported_groups()
        kind, variant, count = self._device(spec.resources)
        matching = [g for g in groups if g.device_type == kind and (kind == "cpu" or g.device_variant == variant)]
        wanted = f"{kind}:{variant or kind}"
        if not matching:
            raise CapacityError(
                f"the Iris cluster refuses job {spec.name!r}: no scaling group provides device {wanted} "
                f"(available: {', '.join(g.name for g in groups) or 'none'})"
            )
        if kind != "cpu" and self._groups is not None:
            fitting = [g for g in matching if g.device_count >= count]
            if not fitting:
                detail = ", ".join(f"{g.name} ({kind}: need {count}, available {g.device_count})" for g in matching)
                raise CapacityError(
                    f"the Iris cluster refuses job {spec.name!r}: no matching scaling group has enough per-VM "
                    f"capacity: {detail}"
                )
            matching = fitting
        if spec.replicas == 1 or any(g.num_vms == spec.replicas for g in matching):
            return True
        if any(g.num_vms == UNKNOWN for g in matching):
            return False
        detail = ", ".join(f"{g.name}={g.num_vms}" for g in matching)
        raise CapacityError(
            f"the Iris cluster can never place job {spec.name!r}: coschedule_mismatch: job needs "
            f"{spec.replicas} tasks coscheduled but no matching group has num_vms={spec.replicas} ({detail})"
        )

    def _reported_groups(self) -> tuple[ScaleGroup, ...]:
        """The controller's scale groups; VMs per slice from a live slice, else UNKNOWN."""
        status = self.client._cluster_client.get_autoscaler_status().status
        return tuple(
            ScaleGroup(
                g.name,
                g.device_type or "cpu",
                (g.device_variant or "").lower(),
                device_count=0,
                num_vms=max((len(s.vms) for s in g.slices), default=UNKNOWN),
                max_slices=0,
            )
            for g in status.groups
        )

    def _await_routing(self, job_id: str, spec: JobSpec) -> None:
        """A gang submitted while its group's slice size was unknown: the autoscaler's first routing
        of it (within one evaluation; the job is still pending) says whether any group can ever hold
        it. If none can, the job is cancelled and CapacityError carries Iris's reason; otherwise (or
        with no verdict within ROUTING_WAIT seconds) it stays submitted."""

        def routed() -> tuple[str] | None:
            """(the autoscaler's reason,) once it routed the job; ("",) once the job left pending."""
            raw = self._raw(job_id)
            if str(getattr(raw.state, "value", raw.state)) != "pending":  # placed (building, running) or ended
                return ("",)
            _, found, hint = raw.pending_reason.partition(AUTOSCALER_HINT)
            return (hint.strip().removeprefix(UNMET),) if found else None

        try:
            (reason,) = wait_until(routed, ROUTING_WAIT, f"the autoscaler's routing of job {job_id}", 0.2)
        except WaitTimeout:
            return
        if reason.startswith(NEVER_PLACED):
            self._stop([job_id])
            raise CapacityError(
                f"the Iris cluster can never place job {spec.name!r}: {reason} (the controller reports no "
                f"slice size before a slice is live; job {job_id} was cancelled)"
            )

    @staticmethod
    def _device(resources: Resources) -> tuple[str, str, int]:
        if resources.accelerators and resources.accelerator_type and resources.accelerator_type.lower() != "cpu":
            return "gpu", resources.accelerator_type.lower(), resources.accelerators
        return "cpu", "", 0

    # -- submitting ----------------------------------------------------------------------------

    def submit(self, spec: JobSpec, *, parent: str | None = None) -> str:
        """Submit `spec` once the checks pass (see `_check_groups` and `_await_routing`)."""
        from iris.client.client import get_iris_ctx

        ctx = get_iris_ctx()
        current = ctx.job_id.to_wire() if ctx is not None and ctx.job_id is not None else None
        if parent is not None and parent != current:
            raise ValueError(
                f"the iris backend makes a job a child of the task that submits it ({current or 'none here'}); "
                f"submit from inside {parent} (submit_child) to make it that job's child"
            )
        if parent is None and current is not None:
            raise ValueError(f"inside Iris job {current} every submission is its child: use submit_child")
        self._check_spec_env(spec)
        if parent is not None:
            self._check_live_parent(parent)
        settled = self._check_groups(spec)
        job_id = self._launch(spec)
        if not settled:
            self._await_routing(job_id, spec)
        return job_id

    def _launch(self, spec: JobSpec) -> str:
        from connectrpc.errors import ConnectError
        from iris.client import JobAlreadyExists
        from iris.cluster.types import CoschedulingConfig, Entrypoint, EnvironmentSpec, ResourceSpec, gpu_device
        from iris.rpc import job_pb2
        from rigging.secrets import SecretBehavior
        from rigging.timing import Duration

        kind, variant, count = self._device(spec.resources)
        resources = ResourceSpec(
            cpu=spec.resources.cpu,
            memory=spec.resources.memory_bytes or 0,
            disk=spec.resources.disk_bytes or 0,
            device=gpu_device(spec.resources.accelerator_type or variant, count) if kind == "gpu" else None,
        )
        argv = [self.python if spec.argv[0] == sys.executable else spec.argv[0], *spec.argv[1:]]
        env = {**spec.env, **self.environment(), LABELS_ENV: json.dumps(dict(spec.labels), sort_keys=True)}
        cwd = os.path.abspath(spec.working_dir) if spec.working_dir else None
        job_env = {JOB_ENV: encode_job(self.python, argv, env, cwd)}
        band = getattr(job_pb2, f"PRIORITY_BAND_{(self.priority or 'inherit').upper()}")
        for _ in range(3):
            name = self._unique_name(spec.name)
            try:
                job = self.client.submit(
                    Entrypoint.from_command("python", "-c", BOOTSTRAP),
                    name,
                    resources,
                    environment=EnvironmentSpec(
                        env_vars=job_env, setup_scripts=[], secret_behavior=SecretBehavior.ISOLATE
                    ),
                    ports=list(PORT_NAMES),
                    scheduling_timeout=Duration.from_seconds(self.scheduling_timeout),
                    coscheduling=CoschedulingConfig(group_by=COSCHEDULE_BY) if spec.replicas > 1 else None,
                    replicas=spec.replicas,
                    max_retries_failure=spec.max_retries,
                    max_task_failures=spec.max_retries * spec.replicas,
                    timeout=Duration.from_seconds(spec.timeout_seconds) if spec.timeout_seconds else None,
                    priority_band=band,
                    existing_job_policy=job_pb2.EXISTING_JOB_POLICY_ERROR,
                )
            except JobAlreadyExists:
                continue
            except ConnectError as exc:
                if "unschedulable" in str(exc):
                    raise CapacityError(f"the Iris cluster refuses job {spec.name!r}: {exc.message}") from None
                raise RuntimeError(f"the Iris controller refused job {spec.name!r}: {exc.message}") from None
            return str(job.job_id.to_wire())
        raise RuntimeError(f"could not find a free Iris job name for {spec.name!r}")

    @staticmethod
    def _unique_name(name: str) -> str:
        suffix = "".join(secrets.choice(_SUFFIX) for _ in range(6))
        return iris_job_name(f"{name[: MAX_JOB_NAME - 7].rstrip('-.')}-{suffix}")

    # -- inspecting ----------------------------------------------------------------------------

    def _name(self, job_id: str) -> Any:
        from iris.cluster.types import JobName

        try:
            name = JobName.from_wire(job_id)
        except ValueError:
            raise JobNotFoundError(f"{job_id!r} is not an Iris job id (they look like /<user>/<job>)") from None
        if name.is_task:
            raise JobNotFoundError(f"{job_id!r} is an Iris task; give its job {name.parent.to_wire()}")
        return name

    def _raw(self, job_id: str) -> Any:
        from connectrpc.code import Code
        from connectrpc.errors import ConnectError

        try:
            return self.client.job_status(self._name(job_id))
        except ConnectError as exc:
            if exc.code == Code.NOT_FOUND:
                raise JobNotFoundError(f"no Iris job {job_id!r} at {self.controller_url}") from None
            raise

    def _request(self, job_id: str) -> Any:
        """The job's original submission as the controller keeps it (None when it cannot be read)."""
        from iris.rpc import controller_pb2

        request = controller_pb2.Controller.GetJobStatusRequest(job_id=job_id)
        try:
            return self.client._cluster_client._client.get_job_status(request).request
        except Exception:  # noqa: BLE001 - a convenience; the job's state does not need it
            return None

    def _labels(self, job_id: str) -> dict[str, str]:
        """The labels rlaunch put in the job's environment (read back from the original request)."""
        request = self._request(job_id)
        if request is None:
            return {}
        job = json.loads(request.environment.env_vars.get(JOB_ENV) or "{}")
        labels: dict[str, str] = json.loads(job.get("env", {}).get(LABELS_ENV) or "{}")
        return labels

    def _build(self, raw: Any, children: list[str], labels: dict[str, str]) -> JobStatus:
        job_id = raw.job_id.to_wire()
        state = _state(raw.state)
        tasks = sorted(self.client.list_tasks(raw.job_id), key=lambda t: t.task_id.task_index)
        replicas = tuple(
            ReplicaStatus(
                rank=int(t.task_id.task_index),
                state=_state(t.state),
                attempts=t.current_attempt_number + 1 if t.attempts else 0,  # Iris lists the current attempt
                exit_code=t.exit_code if _state(t.state).terminal else None,
                started_at=_iso(t.started_at),
                finished_at=_iso(t.finished_at),
            )
            for t in tasks
        )
        if state.terminal:
            message = raw.error_message or None
        else:
            message = raw.pending_reason or raw.status_message or None
        if state is JobState.FAILED and not message:
            failed = [t for t in tasks if t.error_message]
            message = failed[0].error_message if failed else None
        return JobStatus(
            job_id=job_id,
            name=raw.job_id.name,
            backend=self.name,
            state=state,
            replicas=replicas,
            parent=raw.job_id.parent.to_wire() if raw.job_id.parent else None,
            children=tuple(children),
            submitted_at=_iso(raw.submitted_at),
            started_at=_iso(raw.started_at),
            finished_at=_iso(raw.finished_at) if state.terminal else None,
            message=message,
            labels=labels,
        )

    def _children(self, job_id: str) -> list[str]:
        return sorted(
            j.job_id.to_wire()
            for j in self.client.list_jobs(prefix=job_id + "/")
            if j.job_id.parent is not None and j.job_id.parent.to_wire() == job_id
        )

    def status(self, job_id: str) -> JobStatus:
        raw = self._raw(job_id)
        return self._build(raw, self._children(job_id), self._labels(job_id))

    def _state_of(self, job_id: str) -> JobState:
        return _state(self.client.job_state(self._name(job_id)))

    def _ended(self, job_id: str) -> bool:
        return self._state_of(job_id).terminal

    def _replica_count(self, job_id: str) -> int:
        return int(self._raw(job_id).task_count)

    def _log_lines(self, job_id: str, query: LogQuery) -> Iterator[str]:
        """The job's own tasks' lines as `[rank N] line` (a child job's lines share its prefix: left out)."""
        name = self._name(job_id)
        job = self.client.job(name)

        def combined(entries: Any) -> Iterator[str]:
            for entry in entries:
                if entry.task_id.parent == name:
                    yield f"{rank_prefix(entry.task_id.task_index)}{entry.data}"

        if not query.follow or query.finished():
            yield from pick_lines(combined(job.logs()), query.pick, query.tail)
            return
        seen = 0
        if query.tail is not None:
            lines = list(combined(job.logs()))
            seen = len(lines)
            yield from pick_lines(lines, query.pick, query.tail)
        for index, line in enumerate(combined(job.follow_logs(poll_interval=0.5))):
            if index >= seen:
                picked = query.pick(line)
                if picked is not None:
                    yield picked

    def _statuses(self) -> list[JobStatus]:
        jobs = self.client.list_jobs()
        children = self._child_lookup(jobs)
        return [self._build(j, children(j.job_id.to_wire()), self._labels(j.job_id.to_wire())) for j in jobs]

    def _child_lookup(self, jobs: list[Any] | None = None) -> Callable[[str], list[str]]:
        by_parent: dict[str, list[str]] = {}
        for job in self.client.list_jobs() if jobs is None else jobs:
            if job.job_id.parent is not None:
                by_parent.setdefault(job.job_id.parent.to_wire(), []).append(job.job_id.to_wire())
        return lambda job_id: sorted(by_parent.get(job_id, []))

    # -- stopping ------------------------------------------------------------------------------

    def _request_cancel(self, job_ids: list[str], reason: str | None) -> None:
        """Iris keeps no reason with a cancel; the cancel itself is `_stop`."""
        return None

    def _stop(self, job_ids: list[str]) -> None:
        """Terminate each job still running (Iris cascades to descendants; a child may already be gone)."""
        from connectrpc.errors import ConnectError

        for job_id in job_ids:
            with contextlib.suppress(ConnectError, JobNotFoundError):
                if not self._ended(job_id):
                    self.client.cancel_job(self._name(job_id))
