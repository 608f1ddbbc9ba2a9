"""Readiness's host resources at their edges: a hand-written document (no execution class, no
coordinator), every host field left to its default, a colocated plan's one role, and the settings
a large launch lists as relied-on defaults, each named by its execution (`cluster` when none)."""

from __future__ import annotations

import dataclasses
from typing import Any

from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.skyrl.views.readiness import DEFAULT, MISSING, OK, ReadinessItem, launch_values, readiness, relied_defaults
from tests.support import specs as h


def _document(**spec_kwargs: Any) -> SkyRLLaunchConfig:
    return h.planned_view(h.spec(**spec_kwargs))[0]


def _cluster(document: SkyRLLaunchConfig, **changes: Any) -> SkyRLLaunchConfig:
    return dataclasses.replace(document, cluster=dataclasses.replace(document.cluster, **changes))


def _hosts(document: SkyRLLaunchConfig) -> dict[str, ReadinessItem]:
    _, facts = h.planned_view(h.spec())
    labels = ("policy hosts", "rollout hosts", "policy+rollout", "coordinator")
    return {i.label: i for i in readiness(PlannedLaunch.of(document), facts) if i.label in labels}


def test_launch_values_are_the_allocation_the_limits_and_the_coordinator_when_there_is_one() -> None:
    document = _document()
    alloc, cluster = document.cluster.allocation, document.cluster
    coordinator = cluster.coordinator
    assert coordinator is not None
    assert launch_values(document) == {
        "cpu": alloc.cpu,
        "memory": alloc.memory,
        "disk": alloc.disk,
        "job_timeout_seconds": cluster.timeout_seconds,
        "max_retries": cluster.max_retries,
        "coordinator_cpu": coordinator.cpu,
        "coordinator_memory": coordinator.memory,
        "coordinator_disk": coordinator.disk,
        "coordinator_timeout_hours": coordinator.timeout_hours,
    }
    assert launch_values(_cluster(document, coordinator=None)) == {
        "cpu": 96,
        "memory": "1600GB",
        "disk": "4TB",
        "job_timeout_seconds": cluster.timeout_seconds,
        "max_retries": cluster.max_retries,
    }


def test_a_hand_written_document_names_itself_and_misses_its_coordinator() -> None:
    document = _cluster(_document(), execution=None, defaults=(), coordinator=None)
    items = _hosts(document)
    assert items["policy hosts"] == ReadinessItem(
        "policy hosts", "4 node(s), each 96 CPU, 1600GB memory, 4TB disk", "the launch document(cpu, memory, disk)", OK
    )
    assert items["coordinator"] == ReadinessItem(
        "coordinator", "not stated", "the launch document has no cluster.coordinator", MISSING
    )
    assert relied_defaults(_cluster(document, defaults=("cpu", "max_retries"))) == [
        "cluster.cpu=96.0",
        f"cluster.max_retries={document.cluster.max_retries}",
    ]


def test_hosts_left_wholly_to_their_defaults_name_only_the_defaults() -> None:
    document = _cluster(_document(), defaults=("cpu", "memory", "disk"))
    kind = document.cluster.execution
    (policy, rollout) = _hosts(document)["policy hosts"], _hosts(document)["rollout hosts"]
    assert policy.state == DEFAULT and policy.source == f"{kind} defaults for cpu, memory, disk"
    assert policy.value == "4 node(s), each 96 CPU [default], 1600GB memory [default], 4TB disk [default]"
    assert rollout.value == policy.value


def test_a_colocated_plan_has_one_role_on_every_node() -> None:
    document = _document(topo=h.topology())
    items = _hosts(document)
    assert "policy hosts" not in items and "rollout hosts" not in items
    nodes = document.cluster.allocation.num_nodes
    assert items["policy+rollout"].value == f"{nodes} node(s), each 96 CPU, 1600GB memory, 4TB disk"
