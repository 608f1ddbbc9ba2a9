"""`SlurmBackend`: rlaunch jobs as Slurm jobs; the gang lifecycle runs inside the allocation.

A job is one Slurm job of `replicas` nodes (one task per node). Its batch script runs the gang
driver (`rlaunch.cluster.slurm.job_driver`: the gang engine's supervisor with Slurm as transport)
on the first node; the driver starts each replica's attempt as a job step on its own node
(`srun --nodes=1 --ntasks=1 --relative=<rank>`), copies the steps' output into the job's log
files, retries a failed replica as the lifecycle says, obeys cancel requests and cancels the
job's children when it ends. State lives in files as for the local backend (the gang engine,
`rlaunch.cluster.gang`), under a root every node sees, one directory per Slurm job id (so `squeue`,
`scancel` and rlaunch name jobs alike):

    <root>/<slurm job id>/job.json, state.json, cancel.json, children/, logs/job.log,
                          logs/rank-<r>.attempt-<a>.log, supervisor.log (the driver's own output)

  submit    the queue check (`queue_check`: each violation with its fix; nothing is queued),
            then `sbatch --hold` (job argv and environment travel in the job's environment,
            never in a file), the records, `scontrol release`
  status    the driver's record; a pending job's message is Slurm's reason (squeue); a job Slurm
            ended before its driver recorded an outcome (scancel from outside, time limit, node
            failure) is recorded failed with Slurm's state, or cancelled when rlaunch cancelled it
  cancel    the cancel request the driver obeys, and `scancel` for a job still waiting in the queue
  node fail a driver that gets SIGTERM, or sees a replica's step end, asks Slurm why: a node of the
            job failed (NODE_FAIL, reason NodeDown) is recorded failed with the nodes Slurm holds
            down; any other SIGTERM is a cancel
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import rlaunch
from rlaunch.cluster.gang.engine import DEFAULT_KILL_GRACE, KILL_GRACE_ENV, GangEngine
from rlaunch.cluster.gang.state import JobDir
from rlaunch.cluster.job_environment import base_environment, free_port
from rlaunch.cluster.protocol import BACKEND_ENV, NODE_IP_ENV, CapacityError, JobSpec, JobState, JobStatus, Resources
from rlaunch.cluster.slurm import commands
from rlaunch.cluster.slurm.commands import QueueEntry, SlurmError, key_values, queue_entry
from rlaunch.cluster.slurm.queue_check import read_partition, violations
from rlaunch.placement import SlurmPlacement

ROOT_ENV = "RLAUNCH_SLURM_ROOT"
PLACEMENT_ENV = "RLAUNCH_SLURM_PLACEMENT"  # the placement, forwarded so a job's children queue alike
JOB_ENV = "RLAUNCH_SLURM_JOB"  # argv, environment and working directory of the job, for its driver
SITE_SETTINGS = ("SLURM_CONF",)  # Slurm's own settings that travel with every job (and to its sbatch)
DRIVER_MODULE = "rlaunch.cluster.slurm.job_driver"
QUEUE_TTL_SECONDS = 1.0
SIGNAL_QUERY_SECONDS = 3.0  # a signalled driver's questions to Slurm, each well within KillWait


def default_root() -> Path:
    """`$RLAUNCH_SLURM_ROOT`, else `<prefix>/.slurm-jobs` for a local prefix (it must be shared by the nodes)."""
    configured = os.environ.get(ROOT_ENV)
    if configured:
        return Path(os.path.abspath(os.path.expanduser(configured)))
    from rlaunch.storage import default_prefix

    prefix = default_prefix().removeprefix("file://")
    if "://" in prefix:
        raise SlurmError(
            f"the slurm backend keeps job state in a directory every node sees; the prefix {prefix} is not one: "
            f"set ${ROOT_ENV} (or SlurmSkyRLExecution(jobs_root=...)) to a shared filesystem path"
        )
    return Path(prefix) / ".slurm-jobs"


class SlurmBackend(GangEngine):
    """Slurm through sbatch/srun/squeue/scontrol/scancel/sinfo; options are a `SlurmPlacement`'s."""

    name = "slurm"
    owned_variables = (NODE_IP_ENV,)  # each replica's node, as Slurm reaches it

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        partition: str | None = None,
        account: str | None = None,
        qos: str | None = None,
        time_limit_minutes: int | None = None,
        constraint: str | None = None,
        gpu_gres: str = "gpu",
        exclusive: bool = False,
        sbatch_options: Mapping[str, str] | None = None,
        kill_grace: float | None = None,
    ) -> None:
        self.placement = SlurmPlacement(
            root=os.fspath(root) if root is not None else None,
            partition=partition,
            account=account,
            qos=qos,
            time_limit_minutes=time_limit_minutes,
            constraint=constraint,
            gpu_gres=gpu_gres,
            exclusive=exclusive,
            sbatch_options=dict(sbatch_options or {}),
            owner="SlurmBackend",
        )
        if kill_grace is None:
            configured = os.environ.get(KILL_GRACE_ENV)
            kill_grace = float(configured) if configured else DEFAULT_KILL_GRACE
        super().__init__(
            Path(os.path.abspath(os.path.expanduser(root))) if root is not None else default_root(), kill_grace
        )
        self._addresses: list[str] | None = None
        self._entries: dict[str, tuple[float, QueueEntry | None]] = {}

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> SlurmBackend:
        """Inside a job: the same root, placement and kill grace as the backend that submitted it."""
        options = json.loads(env.get(PLACEMENT_ENV) or "{}")
        grace = env.get(KILL_GRACE_ENV)
        return cls(
            **{**options, "root": env.get(ROOT_ENV) or options.get("root")},
            kill_grace=float(grace) if grace else None,
        )

    def environment(self) -> dict[str, str]:
        site = {name: os.environ[name] for name in SITE_SETTINGS if os.environ.get(name)}
        return {
            BACKEND_ENV: self.name,
            ROOT_ENV: str(self.root),
            KILL_GRACE_ENV: f"{self.kill_grace:g}",
            PLACEMENT_ENV: json.dumps(self.placement.options(), sort_keys=True),
            **site,
        }

    # -- submitting ----------------------------------------------------------------------------

    def check(self, spec: JobSpec, *, parent: str | None = None, beside: Resources | None = None) -> None:
        """CapacityError listing every reason `spec` could never start in the partition (nothing is queued)."""
        try:
            partition = read_partition(self.placement.partition)
        except SlurmError as exc:
            if "does not exist" in str(exc) or "no default partition" in str(exc):
                raise CapacityError(f"Slurm would refuse job {spec.name!r}: {exc}") from None
            raise
        found = violations(spec, self.placement, partition)
        if found:
            raise CapacityError(
                f"Slurm could never start job {spec.name!r} in partition {partition.name}:\n  - " + "\n  - ".join(found)
            )

    def submit(self, spec: JobSpec, *, parent: str | None = None) -> str:
        working_dir = self._admit(spec, parent)
        payload = {"argv": list(spec.argv), "env": self._replica_env(spec, {})}
        self.root.mkdir(parents=True, exist_ok=True)
        job_id = (
            commands.run(self._sbatch_args(spec), env=self._sbatch_env(json.dumps(payload)), stdin=self._batch_script())
            .strip()
            .split(";")[0]
        )
        try:
            job = JobDir(self.root, job_id)
            job.path.mkdir()
            job.logs_dir.mkdir()
            self._write_records(job, spec, parent, working_dir)
            commands.run(["scontrol", "release", job_id])
        except BaseException:
            commands.run(["scancel", job_id])
            raise
        return job_id

    def _sbatch_args(self, spec: JobSpec) -> list[str]:
        resources = spec.resources
        args = [
            "sbatch", "--parsable", "--hold", "--no-requeue", "--export=ALL", f"--job-name={spec.name}",
            f"--nodes={spec.replicas}", "--ntasks-per-node=1", f"--cpus-per-task={max(1, -(-int(resources.cpu * 1000) // 1000))}",
            f"--output={self.root}/%j/supervisor.log", f"--chdir={self.root}",
        ]  # fmt: skip
        if resources.memory_bytes:
            args.append(f"--mem={-(-resources.memory_bytes // 2**20)}M")
        if resources.accelerators:
            args.append(f"--gres={self.placement.gpu_gres}:{resources.accelerators}")
        return args + self.placement.sbatch_args()

    def _sbatch_env(self, payload: str) -> dict[str, str]:
        """sbatch's whole environment (it exports it to the job): the allow-listed base, how to import
        rlaunch, Slurm's site settings and the job itself; nothing else of the submitter's crosses."""
        package_parent = str(Path(rlaunch.__file__).resolve().parents[1])
        site = {name: os.environ[name] for name in SITE_SETTINGS if os.environ.get(name)}
        return {**base_environment(), "PYTHONPATH": package_parent, **site, JOB_ENV: payload}

    def _batch_script(self) -> str:
        return f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m {DRIVER_MODULE} {shlex.quote(str(self.root))}\n"

    # -- the driver's transport ----------------------------------------------------------------

    def node_addresses(self) -> list[str]:
        """The allocation's nodes in rank order, each as the address Slurm reaches it at (NodeAddr, resolved)."""
        if self._addresses is None:
            names = commands.run(["scontrol", "show", "hostnames", os.environ["SLURM_JOB_NODELIST"]]).split()
            shown = commands.run(["scontrol", "show", "node", "-o", os.environ["SLURM_JOB_NODELIST"]])
            found = {
                r["NodeName"]: r.get("NodeAddr", r["NodeName"])
                for r in map(key_values, shown.splitlines())
                if "NodeName" in r
            }
            self._addresses = [socket.gethostbyname(found.get(name, name)) for name in names]
        return self._addresses

    def gang_rendezvous(self) -> str:
        """On rank 0's node, where the driver runs (the allocation's first node)."""
        host = self.node_addresses()[0]
        return f"{host}:{free_port(host)}"

    def replica_command(self, rank: int, argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        """One attempt of replica `rank`: a job step on the allocation's node `rank`, with the job's
        environment, the allocation's own SLURM_* variables (srun needs them; the step sees them) and
        the node's address (RLAUNCH_NODE_IP: a Ray node started there advertises it)."""
        allocation = {k: v for k, v in os.environ.items() if k.startswith("SLURM")}
        step = [
            "srun", "--nodes=1", "--ntasks=1", f"--relative={rank}", "--kill-on-bad-exit=1", "--export=ALL",
            f"--job-name={os.environ.get('SLURM_JOB_NAME', 'rlaunch')}.rank{rank}",
        ]  # fmt: skip
        if os.environ.get("SLURM_CPUS_PER_TASK"):  # every CPU of the node's task (srun does not always inherit it)
            step.append(f"--cpus-per-task={os.environ['SLURM_CPUS_PER_TASK']}")
        return step + argv, {**env, **allocation, NODE_IP_ENV: self.node_addresses()[rank]}

    def _stop_left(self, pids: list[int]) -> None:
        """Slurm stopped the job's steps when it ended the job: nothing is left to stop."""
        return None

    # -- inspecting ----------------------------------------------------------------------------

    def status(self, job_id: str) -> JobStatus:
        status = super().status(job_id)
        if status.state is JobState.PENDING and status.message is None:
            entry = self._entry(job_id)
            if entry is not None and entry.state == "PENDING":
                reason = entry.reason if entry.reason != "None" else "not yet looked at by the scheduler"
                return replace(status, message=f"pending in Slurm: {reason}")
        return status

    def _entry(self, job_id: str) -> QueueEntry | None:
        """The job's queue entry, asked of Slurm at most once a second (one status reads it twice,
        and every waiter polls: slurmctld is shared by the whole site)."""
        now = time.monotonic()
        cached = self._entries.get(job_id)
        if cached is None or now - cached[0] > QUEUE_TTL_SECONDS:
            cached = self._entries[job_id] = (now, queue_entry(job_id))
        return cached[1]

    def _supervisor_gone(self, job: JobDir, record: dict[str, Any]) -> bool:
        """The Slurm job ended (or slurmctld forgot it) without its driver recording an outcome."""
        try:
            entry = self._entry(job.job_id)
        except SlurmError:
            return False  # the queue does not answer: nothing can be told now
        return entry is None or entry.ended

    def _lost_message(self, job: JobDir) -> str:
        entry = self._entry(job.job_id)
        how = f"{entry.state}, reason {entry.reason}" if entry else "slurmctld no longer knows it"
        nodes = commands.job_nodes(job.job_id)
        on = f" on node(s) {nodes}" if nodes else ""  # where it happened: `launch_config.failures` reads it
        return f"the Slurm job ended ({how}){on} before its driver recorded an outcome (see {job.supervisor_log})"

    def scheduler_failure(self, job_id: str) -> str | None:
        """The driver was signalled, or a replica's step ended (srun returns, often 0, when Slurm tells
        it its node failed, before the driver's SIGTERM): Slurm's word when it ends the job because a
        node of it failed (`scontrol update state=down`, a node that stopped answering): the job's
        state and reason and the nodes Slurm holds down. Each question is answered within
        SIGNAL_QUERY_SECONDS (Slurm kills the driver KillWait seconds after its SIGTERM); None when
        it is not a node failure or Slurm does not say."""
        entry = None
        for _ in range(2):  # a question that fails once (slurmctld busy) is asked again
            try:
                entry = commands.queue_entry(job_id, timeout=SIGNAL_QUERY_SECONDS, shielded=True)
                break
            except SlurmError:
                continue
        if entry is None or not entry.node_failed:
            return None
        allocation = os.environ.get("SLURM_JOB_NODELIST") or commands.job_nodes(job_id)
        try:
            down = commands.failed_nodes(allocation, timeout=SIGNAL_QUERY_SECONDS, shielded=True) if allocation else []
        except SlurmError:
            down = []
        names = ",".join(node.split()[0] for node in down) or allocation
        on = f" on node(s) {names}" if names else ""  # where it happened: `launch_config.failures` reads it
        held = f" (Slurm holds {', '.join(down)} down)" if down else ""
        return f"the Slurm job is ending ({entry.state}, reason {entry.reason}){on} because a node of it failed{held}"

    # -- stopping ------------------------------------------------------------------------------

    def _await_ended(self, job_ids: list[str]) -> None:
        """Wait for the drivers to record the cancel; a job whose driver did not is ended by Slurm
        (scancel: its driver gets SIGTERM, and a job that ends without an outcome is taken over)."""
        super()._await_ended(job_ids)
        left = [job_id for job_id in job_ids if not self._ended(job_id)]
        if left:
            commands.run(["scancel", *left])
            super()._await_ended(left)

    def _stop(self, job_ids: list[str]) -> None:
        """A job still waiting in the queue has no driver to obey the request: Slurm drops it."""
        waiting = [job_id for job_id in job_ids if (entry := self._entry(job_id)) and entry.state == "PENDING"]
        if waiting:
            commands.run(["scancel", *waiting])
