"""The queue check: whether a job could ever start in its partition, asked before sbatch.

The facts come from Slurm (`scontrol show partition -o`, `sinfo -N`); the checks are pure, so
every rule is table-tested. Each violation says what is wrong and the fix:

  the partition exists (and is UP)
  the node count fits: enough of its nodes offer the CPUs, memory, GPUs (gres) and features asked
  GPUs per node: some node has that many of the requested gres
  the time limit is within the partition's MaxTime
  the account (and QOS) may use the partition (AllowAccounts / DenyAccounts / AllowQos)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rlaunch.cluster.protocol import JobSpec
from rlaunch.cluster.slurm.commands import SlurmError, key_values, run
from rlaunch.placement import SlurmPlacement

_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


@dataclass(frozen=True)
class Node:
    name: str
    cpus: int
    memory_mb: int
    gres: str  # as sinfo prints it: gpu:2, gpu:a100:4(S:0-1), (null)
    features: frozenset[str]

    def gpus(self, gpu_gres: str) -> int:
        """How many of `gpu_gres` (`gpu` or `gpu:<type>`) this node has."""
        name, _, kind = gpu_gres.partition(":")
        total = 0
        for item in self.gres.split(","):
            parts = re.sub(r"\(.*?\)", "", item).split(":")
            if parts[0] != name or len(parts) < 2 or not parts[-1].isdigit():
                continue
            if kind and (len(parts) < 3 or parts[1] != kind):
                continue
            total += int(parts[-1])
        return total


@dataclass(frozen=True)
class Partition:
    name: str
    state: str
    max_time_minutes: int | None  # None: UNLIMITED
    max_nodes: int | None
    allow_accounts: frozenset[str] | None  # None: ALL
    deny_accounts: frozenset[str]
    allow_qos: frozenset[str] | None
    nodes: tuple[Node, ...]


def minutes(text: str) -> int | None:
    """A Slurm duration ([D-]HH:MM:SS, MM, MM:SS, D-HH) in whole minutes, rounded up; None for UNLIMITED."""
    if text in ("UNLIMITED", "INFINITE", "NONE"):
        return None
    match = _TIME.match(text)
    if not match:
        raise SlurmError(f"Slurm reported a time limit rlaunch cannot read: {text!r}")
    days, first, second, third = match.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        hours, mins, secs = int(first), int(second or 0), int(third or 0)
    elif third is not None:  # HH:MM:SS
        hours, mins, secs = int(first), int(second), int(third)
    else:  # MM[:SS]
        hours, mins, secs = 0, int(first), int(second or 0)
    return int(days or 0) * 1440 + hours * 60 + mins + math.ceil(secs / 60)


def _names(value: str | None) -> frozenset[str] | None:
    if value is None or value == "ALL":
        return None
    return frozenset(v for v in value.split(",") if v)


def read_partition(name: str | None) -> Partition:
    """The partition `name` (None: the cluster's default) as Slurm reports it; SlurmError when none."""
    lines = [key_values(line) for line in run(["scontrol", "show", "partition", "-o"]).splitlines() if line.strip()]
    known = [p["PartitionName"] for p in lines if "PartitionName" in p]
    if name is None:
        found = [p for p in lines if p.get("Default") == "YES"]
        if not found:
            raise SlurmError(
                f"this Slurm cluster has no default partition; set SlurmSkyRLExecution(partition=...) to one of {known}"
            )
    else:
        found = [p for p in lines if p.get("PartitionName") == name]
        if not found:
            raise SlurmError(
                f"partition {name!r} does not exist on this Slurm cluster; set SlurmSkyRLExecution(partition=...) "
                f"to one of {known}"
            )
    raw = found[0]
    rows = run(["sinfo", "-h", "-N", "-p", raw["PartitionName"], "-o", "%N|%c|%m|%G|%f"]).splitlines()
    nodes = {}
    for row in rows:
        node, cpus, memory, gres, features = row.split("|")
        nodes[node] = Node(
            node, int(cpus.rstrip("+")), int(memory.rstrip("+") or 0), gres, frozenset(features.split(",")) - {"(null)"}
        )
    max_nodes = raw.get("MaxNodes", "UNLIMITED")
    return Partition(
        name=raw["PartitionName"],
        state=raw.get("State", "UP"),
        max_time_minutes=minutes(raw.get("MaxTime", "UNLIMITED")),
        max_nodes=None if max_nodes == "UNLIMITED" else int(max_nodes),
        allow_accounts=_names(raw.get("AllowAccounts")),
        deny_accounts=_names(raw.get("DenyAccounts")) or frozenset(),
        allow_qos=_names(raw.get("AllowQos")),
        nodes=tuple(nodes.values()),
    )


def _has_features(node: Node, constraint: str | None) -> bool:
    """Whether `node` offers every feature of a plain `a&b` (or single) constraint; other expressions
    (|, [], counts) are Slurm's to judge."""
    if not constraint or any(c in constraint for c in "|[]()*!,:"):
        return True
    return set(constraint.split("&")) <= node.features


def violations(spec: JobSpec, placement: SlurmPlacement, partition: Partition) -> list[str]:
    """What stops `spec` from ever starting in `partition`, each with its fix (empty: it fits)."""
    found: list[str] = []
    p = partition
    if p.state != "UP":
        found.append(f"partition {p.name} is {p.state}, not UP: choose another partition or ask the admins")
    account = placement.account
    if p.allow_accounts is not None and account not in p.allow_accounts:
        found.append(
            f"account {account or '(none)'} may not use partition {p.name} (AllowAccounts={','.join(sorted(p.allow_accounts))}): "
            "set SlurmSkyRLExecution(account=...) to one of them"
        )
    if account is not None and account in p.deny_accounts:
        found.append(
            f"account {account} is denied partition {p.name} (DenyAccounts): choose another account or partition"
        )
    if p.allow_qos is not None and placement.qos is not None and placement.qos not in p.allow_qos:
        found.append(
            f"QOS {placement.qos} is not allowed in partition {p.name} (AllowQos={','.join(sorted(p.allow_qos))}): "
            "set SlurmSkyRLExecution(qos=...) to one of them"
        )
    limit = placement.time_limit_minutes
    if limit is not None and p.max_time_minutes is not None and limit > p.max_time_minutes:
        found.append(
            f"time limit {limit} min exceeds partition {p.name}'s MaxTime of {p.max_time_minutes} min: lower "
            "SlurmSkyRLExecution(time_limit_minutes=...) or choose a partition with a longer MaxTime"
        )
    already = len(found)
    if p.max_nodes is not None and spec.replicas > p.max_nodes:
        found.append(
            f"the job needs {spec.replicas} nodes but partition {p.name} allows at most {p.max_nodes} per job "
            "(MaxNodes): lower the topology's num_nodes or choose another partition"
        )
    cpus = math.ceil(spec.resources.cpu)
    memory_mb = math.ceil(spec.resources.memory_bytes / 2**20) if spec.resources.memory_bytes else 0
    gpus = spec.resources.accelerators
    most_gpus = max((n.gpus(placement.gpu_gres) for n in p.nodes), default=0)
    if gpus > most_gpus:
        found.append(
            f"the job needs {gpus} x {placement.gpu_gres} per node but no node of partition {p.name} has more than "
            f"{most_gpus}: lower the topology's gpus_per_node, or set SlurmSkyRLExecution(gpu_gres=...) or partition"
        )
    fitting = [
        n
        for n in p.nodes
        if n.cpus >= cpus
        and n.memory_mb >= memory_mb
        and n.gpus(placement.gpu_gres) >= gpus
        and _has_features(n, placement.constraint)
    ]
    if len(fitting) < spec.replicas and len(found) == already:  # not when a size violation above says why
        asked = (
            f"{cpus} CPU(s)"
            + (f", {memory_mb} MB" if memory_mb else "")
            + (f", {gpus} x {placement.gpu_gres}" if gpus else "")
        )
        asked += f", features {placement.constraint}" if placement.constraint else ""
        offered = ", ".join(f"{n.name} ({n.cpus} CPUs, {n.memory_mb} MB, {n.gres})" for n in p.nodes) or "no nodes"
        found.append(
            f"the job needs {spec.replicas} node(s) with {asked} each but partition {p.name} has {len(fitting)} "
            f"such node(s) [{offered}]: lower num_nodes or the per-node size, or choose a larger partition"
        )
    return found
