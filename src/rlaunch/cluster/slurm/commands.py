"""Slurm's commands as rlaunch calls them: one runner with a time limit, and the queue's answers.

Every call is bounded (`COMMAND_TIMEOUT`): a slurmctld that does not answer is an error naming
the command and the fix, never a hang. Slurm reads its own site settings (`SLURM_CONF`, and
whatever its configuration says); rlaunch passes them through unchanged.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from rlaunch.errors import UserError

COMMAND_TIMEOUT = 30.0
# Slurm job states after which the job runs no more (squeue -t all, scontrol show job).
ENDED = frozenset({
    "BOOT_FAIL", "CANCELLED", "COMPLETED", "DEADLINE", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
    "REVOKED", "SPECIAL_EXIT", "TIMEOUT",
})  # fmt: skip
# A job Slurm ends because a node of it failed: its state once ended, or its reason while it completes.
NODE_FAILED_STATES = frozenset({"NODE_FAIL", "BOOT_FAIL"})
NODE_FAILED_REASONS = frozenset({"NodeDown"})


class SlurmError(UserError, ConnectionError):
    """A Slurm command is missing, failed or did not answer; the message names it and what to do."""


def run(
    argv: list[str],
    *,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = COMMAND_TIMEOUT,
    shielded: bool = False,
) -> str:
    """`argv`'s standard output; SlurmError naming the command when it cannot run, fails or hangs (`timeout`).

    `shielded`: the command ignores SIGTERM. A driver asks Slurm why its job ends while Slurm is
    sending SIGTERM to every process of the job, the question's included; an ignored signal stays
    ignored across exec, so the question still answers (until KillWait's SIGKILL, or `timeout`)."""
    if shutil.which(argv[0], path=(env or {}).get("PATH")) is None and shutil.which(argv[0]) is None:
        raise SlurmError(
            f"{argv[0]} is not on PATH: the slurm backend drives Slurm through sbatch, srun, squeue, scontrol, "
            "scancel and sinfo; run rlaunch where they are installed (a login node) or put them on PATH"
        )
    command = ["sh", "-c", 'trap "" TERM; exec "$@"', "sh", *argv] if shielded else argv
    try:
        done = subprocess.run(
            command, input=stdin, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise SlurmError(
            f"{argv[0]} did not answer within {timeout:g}s; is slurmctld up (`scontrol ping`), and "
            "does $SLURM_CONF name this cluster's configuration?"
        ) from None
    if done.returncode != 0:
        raise SlurmError(
            f"{' '.join(argv[:2])} failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}"
        )
    return done.stdout


def key_values(line: str) -> dict[str, str]:
    """One record of `scontrol show ... -o`: `Key=Value` words (a value may itself hold `=`)."""
    pairs = (word.partition("=") for word in line.split())
    return {key: value for key, sep, value in pairs if sep}


@dataclass(frozen=True)
class QueueEntry:
    """A job as the queue reports it: Slurm's state (PENDING, RUNNING, COMPLETED, ...) and reason."""

    state: str
    reason: str

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @property
    def node_failed(self) -> bool:
        """Slurm is ending (or ended) the job because a node of its allocation failed."""
        return self.state in NODE_FAILED_STATES or self.reason in NODE_FAILED_REASONS


def queue_entry(job_id: str, timeout: float = COMMAND_TIMEOUT, shielded: bool = False) -> QueueEntry | None:
    """The job's queue entry: squeue's, else (slurmctld purged it after MinJobAge) the accounting
    record's; None when neither knows it (a cluster without slurmdbd keeps no accounting)."""
    try:
        out = run(["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T|%r"], timeout=timeout, shielded=shielded)
    except SlurmError as exc:
        if "Invalid job id" not in str(exc):
            raise
        out = ""
    return first_entry(out) or accounting_entry(job_id, shielded)


def first_entry(out: str) -> QueueEntry | None:
    """The first `State|Reason` row of squeue's or sacct's output (sacct writes `CANCELLED by 0`)."""
    rows = [line.split("|", 1) for line in out.splitlines() if "|" in line]
    return QueueEntry(rows[0][0].split()[0], rows[0][1]) if rows and rows[0][0].strip() else None


def accounting_entry(job_id: str, shielded: bool = False) -> QueueEntry | None:
    try:
        return first_entry(run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State,Reason"], shielded=shielded))
    except SlurmError:  # no accounting storage here
        return None


def job_nodes(job_id: str) -> str | None:
    """The nodes a job ran on, as Slurm writes them (`node-[1-2]`); None when Slurm no longer says."""
    for argv in (
        ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "NodeList"],
        ["squeue", "-h", "-t", "all", "-j", job_id, "-o", "%N"],
    ):
        try:
            nodes = run(argv).strip().splitlines()
        except SlurmError:
            continue
        if nodes and nodes[0].strip() not in ("", "None assigned", "(null)"):
            return nodes[0].strip()
    return None


def failed_nodes(nodes: str, timeout: float = COMMAND_TIMEOUT, shielded: bool = False) -> list[str]:
    """Of `nodes` (a Slurm node list), each that Slurm holds DOWN or FAIL, as `name (reason: why)`."""
    found = []
    for line in run(["scontrol", "show", "node", "-o", nodes], timeout=timeout, shielded=shielded).splitlines():
        node = key_values(line)
        states = set(node.get("State", "").split("+"))
        if "NodeName" in node and states & {"DOWN", "FAIL", "FAILING"}:
            reason = line.partition(" Reason=")[2].split(" [")[0].strip()
            found.append(f"{node['NodeName']} (reason: {reason})" if reason else node["NodeName"])
    return found


def queued_ids() -> list[str]:
    """Every job id squeue lists (pending and running), as squeue shows them."""
    return run(["squeue", "-h", "-o", "%i"]).split()
