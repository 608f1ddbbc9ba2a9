"""Will this job ever fit the cluster? Checked before anything is submitted.

A placement group that can never be satisfied waits forever, silently. So before submitting,
the backend reads the alive nodes and their *total* resources (what the nodes have, not what is
free right now: a job that fits once others finish is only queued) and refuses a job that could
not be placed even on an idle cluster, naming every shortfall.

What counts:
  * one bundle per replica: CPU, memory (when the spec sets it), GPU and `accelerator_type:<T>`
    (when it asks for accelerators). Ray has no disk resource: disk is not checked.
  * the strategy: STRICT_SPREAD needs `replicas` distinct nodes that each fit a bundle; PACK,
    SPREAD and STRICT_PACK need the bundles to fit the nodes somehow (STRICT_PACK: one node).
    `auto` picks STRICT_SPREAD when enough nodes fit one bundle each, PACK otherwise (a
    single-node cluster) and refuses only when even packing cannot work.
  * resources the job's ancestors hold while it runs (a coordinator's entrypoint resources, on
    the node its driver runs on) are not available to it: a child that needs the whole cluster
    while its coordinator holds a CPU would wait forever, so it is refused too.

An autoscaling cluster can grow past what it has now: pass `check_capacity=False` there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from rlaunch.cluster.protocol import CapacityError, JobSpec, Resources
from rlaunch.names import sanitize_job_name
from rlaunch.units import format_size

ACCELERATOR_TYPE_PREFIX = "accelerator_type:"
# How much of the `accelerator_type:<T>` marker resource a bundle asks for (Ray's own convention).
ACCELERATOR_TYPE_AMOUNT = 0.001
_EPSILON = 1e-9


@dataclass(frozen=True)
class Node:
    node_id: str
    ip: str
    resources: Mapping[str, float]
    is_head: bool = False


@dataclass
class Fit:
    """The outcome of a successful check: the strategy to use and what one bundle asks for."""

    strategy: str
    bundle: dict[str, float] = field(default_factory=dict)


def bundle_for(resources: Resources) -> dict[str, float]:
    """One replica's Ray resources (bundle / task / entrypoint resources)."""
    bundle: dict[str, float] = {"CPU": float(resources.cpu)}
    if resources.memory_bytes:
        bundle["memory"] = float(resources.memory_bytes)
    if resources.accelerators > 0:
        bundle["GPU"] = float(resources.accelerators)
        if resources.accelerator_type:
            bundle[ACCELERATOR_TYPE_PREFIX + resources.accelerator_type] = ACCELERATOR_TYPE_AMOUNT
    return bundle


def _show(resource: str, amount: float) -> str:
    if resource == "memory":
        return format_size(int(amount))
    return f"{amount:g}"


def _describe(bundle: Mapping[str, float]) -> str:
    return ", ".join(
        f"{_show(k, v)} {k}" for k, v in bundle.items() if not k.startswith(ACCELERATOR_TYPE_PREFIX)
    ) + "".join(
        f", accelerator type {k.removeprefix(ACCELERATOR_TYPE_PREFIX)}"
        for k in bundle
        if k.startswith(ACCELERATOR_TYPE_PREFIX)
    )


def _available(nodes: list[Node], reserved: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """Per node: total resources minus what the job's ancestors hold there."""
    out: dict[str, dict[str, float]] = {}
    for node in nodes:
        have = dict(node.resources)
        for resource, amount in reserved.get(node.node_id, {}).items():
            have[resource] = have.get(resource, 0.0) - amount
        out[node.node_id] = have
    return out


def _copies(have: Mapping[str, float], bundle: Mapping[str, float]) -> int:
    """How many bundles fit into `have`."""
    counts = []
    for resource, need in bundle.items():
        if need <= 0:
            continue
        counts.append(math.floor((have.get(resource, 0.0) + _EPSILON) / need))
    return max(0, min(counts)) if counts else 0


def check_fits(
    spec: JobSpec,
    nodes: list[Node],
    *,
    strategy: str = "auto",
    reserved: Mapping[str, Mapping[str, float]] | None = None,
    cluster: str = "the Ray cluster",
) -> Fit:
    """The strategy to place `spec` with, or CapacityError naming each shortfall."""
    bundle = bundle_for(spec.resources)
    n = spec.replicas
    reserved = reserved or {}
    held = any(reserved.values())
    header = f"job {spec.name!r} ({n} replica{'s' if n != 1 else ''} x {_describe(bundle)}) does not fit {cluster}:"
    hint = (
        "nothing was submitted. Ask for less per replica or fewer replicas, or add nodes; an autoscaling "
        "cluster that will add them can skip this check with check_capacity=False."
    )
    if not nodes:
        raise CapacityError(f"{header}\n  the cluster has no alive nodes\n{hint}")
    available = _available(nodes, reserved)
    problems: list[str] = []
    after = " after what its parent jobs hold" if held else ""
    for resource, need in bundle.items():
        largest = max(available[node.node_id].get(resource, 0.0) for node in nodes)
        if need <= largest + _EPSILON:
            continue
        if resource.startswith(ACCELERATOR_TYPE_PREFIX):
            kind = resource.removeprefix(ACCELERATOR_TYPE_PREFIX)
            problems.append(f"accelerator type {kind}: no node has it (resource {resource!r})")
        else:
            problems.append(
                f"{resource}: each replica needs {_show(resource, need)} but the largest node offers {_show(resource, max(largest, 0.0))}{after}"
            )
    fitting = [node for node in nodes if _copies(available[node.node_id], bundle) >= 1]
    chosen = strategy
    if not problems:
        if strategy == "auto":
            chosen = "PACK" if n == 1 or len(fitting) < n else "STRICT_SPREAD"
        if chosen == "STRICT_SPREAD" and len(fitting) < n:
            problems.append(
                f"nodes: STRICT_SPREAD puts each replica on its own node, so it needs {n} nodes that each fit one "
                f"replica; the cluster has {len(fitting)} (of {len(nodes)} alive)"
            )
        elif chosen == "STRICT_PACK" and not any(_copies(available[node.node_id], bundle) >= n for node in nodes):
            problems.append(
                f"nodes: STRICT_PACK puts all {n} replicas on one node, and no node fits {n} of them{after}"
            )
        elif chosen in ("PACK", "SPREAD") and sum(_copies(available[node.node_id], bundle) for node in nodes) < n:
            for resource, need in bundle.items():
                total = sum(max(available[node.node_id].get(resource, 0.0), 0.0) for node in nodes)
                if need * n > total + _EPSILON:
                    problems.append(
                        f"{resource}: {n} replicas need {_show(resource, need * n)} ({_show(resource, need)} each) but the "
                        f"cluster has {_show(resource, total)} in total{after}"
                    )
            if not problems:
                problems.append(
                    f"placement: the nodes have enough in total but not in the right places: at most "
                    f"{sum(_copies(available[node.node_id], bundle) for node in nodes)} of {n} replicas fit"
                )
    if problems:
        nodes_text = "; ".join(
            f"{node.ip}{' (head)' if node.is_head else ''}: "
            + ", ".join(
                f"{_show(k, v)} {k}"
                for k, v in sorted(node.resources.items())
                if k in ("CPU", "GPU", "memory") or k.startswith(ACCELERATOR_TYPE_PREFIX)
            )
            for node in nodes
        )
        raise CapacityError(f"{header}\n  " + "\n  ".join(problems) + f"\n  (alive nodes: {nodes_text})\n{hint}")
    return Fit(strategy=chosen, bundle=bundle)


def check_fits_beside(
    spec: JobSpec,
    beside: Resources,
    nodes: list[Node],
    *,
    strategy: str = "auto",
    cluster: str = "the Ray cluster",
) -> Fit:
    """`check_fits` for a child job that will run while a job holding `beside` (its coordinator's
    entrypoint resources, on a node Ray picks) runs too: it fits when some node can host the
    coordinator and the child fits the rest. Checked before the coordinator is submitted."""
    need = bundle_for(beside)
    hosts = [node for node in nodes if _copies(node.resources, need) >= 1]
    if not hosts:
        check_fits(
            JobSpec(name=sanitize_job_name(f"{spec.name}-coordinator"), argv=("-",), resources=beside),
            nodes,
            cluster=cluster,
        )
    refusal: CapacityError | None = None
    for node in hosts:
        try:
            return check_fits(spec, nodes, strategy=strategy, reserved={node.node_id: need}, cluster=cluster)
        except CapacityError as exc:
            refusal = refusal or exc
    assert refusal is not None
    raise refusal


def nodes_from_state(rows: list[dict[str, object]]) -> list[Node]:
    """Alive nodes from the state API's node rows (`ray.util.state.list_nodes(detail=True)`)."""
    nodes = []
    for row in rows:
        if row.get("state") != "ALIVE":
            continue
        resources = row.get("resources_total") or {}
        assert isinstance(resources, dict)
        nodes.append(
            Node(
                node_id=str(row["node_id"]),
                ip=str(row.get("node_ip") or "?"),
                resources={str(k): float(v) for k, v in resources.items()},
                is_head=bool(row.get("is_head_node")),
            )
        )
    return nodes


def fetch_nodes(dashboard_url: str) -> list[Node]:
    """The cluster's alive nodes, read through the dashboard's state API."""
    from ray.util.state import list_nodes

    rows = list_nodes(address=dashboard_url, detail=True, limit=10_000, raise_on_missing_output=False)
    return nodes_from_state([row if isinstance(row, dict) else row.__dict__ for row in rows])


def auto_strategy(spec: JobSpec, nodes: list[Node]) -> str:
    """`auto` without the check: STRICT_SPREAD when enough nodes fit a bundle each, else PACK."""
    bundle = bundle_for(spec.resources)
    fitting = sum(1 for node in nodes if _copies(node.resources, bundle) >= 1)
    return "STRICT_SPREAD" if spec.replicas > 1 and fitting >= spec.replicas else "PACK"
