"""How the README's test command spreads the suite over pytest-xdist workers (`-n N --dist loadgroup`).

The model: every test has a *group* and a *rank*. A group is a unit of work that one worker runs
whole: a cluster tier (one Ray, Slurm or Iris cluster per worker that runs the tier: Ray and the
multinode gangs share a group, so two Ray clusters never start at once), the observe lab's readers
(its runs are launched once per worker), and a costly module (its module-scoped fixtures once).
Independent tests (the fast lane, Hypothesis searches, the promise meta-tier's subprocesses) are
groups of one. The rank orders the queue so the long units start first and the short ones fill
the tail: cluster tiers, then costly modules, then spread costly tests, then the fast lane; within
a rank, larger groups first.

Workers know each test's markers and fixtures; the controller that schedules sees only node ids.
So each worker writes `{node id: [rank, group]}` after collection into a directory the controller
hands it (`workerinput`), and the controller's scheduler (xdist's load-scope scheduling with these
scopes) reads it once every worker has collected. pytest-xdist's own `xdist_group` marks are not
used: xdist 3.8 renames the node id to carry the group, which pytest 9.2's node ids no longer allow.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

TIER_GROUPS = {"slurm": "slurm", "ray": "ray", "multinode": "ray", "iris": "iris", "skyrl": "skyrl"}
SHARED_FIXTURE_GROUPS = {"lab": "observe-lab"}
SPREAD = ("fast", "property", "promises")
WORKER_INPUT = "rlaunch_test_groups"  # the directory the workers write their maps into

# ranks: lower starts first
CLUSTER, MODULE, SPREAD_COSTLY, FAST = range(4)


def group_and_rank(item: pytest.Item) -> tuple[str, int]:
    """The unit of work `item` belongs to and when that unit should start."""
    for marker, group in TIER_GROUPS.items():
        if item.get_closest_marker(marker):
            return group, CLUSTER
    for fixture, group in SHARED_FIXTURE_GROUPS.items():
        if fixture in getattr(item, "fixturenames", ()):
            return group, MODULE
    if item.get_closest_marker("fast"):
        return item.nodeid, FAST
    if any(item.get_closest_marker(name) for name in SPREAD):
        return item.nodeid, SPREAD_COSTLY
    return item.nodeid.partition("::")[0], MODULE  # a launch, runtime or parity module: its fixtures once


def write_groups(config: pytest.Config, items: Iterable[pytest.Item]) -> None:
    """On a worker: record every collected test's group and rank for the controller."""
    directory = getattr(config, "workerinput", {}).get(WORKER_INPUT)
    if directory is None:
        return
    groups = {item.nodeid: group_and_rank(item)[::-1] for item in items}
    target = Path(directory) / f"{config.workerinput['workerid']}.json"  # type: ignore[attr-defined]
    temporary = target.with_suffix(".tmp")
    temporary.write_text(json.dumps(groups), encoding="utf-8")
    os.replace(temporary, target)  # the controller never reads half a map


def groups_directory() -> str:
    """On the controller: a fresh directory for the workers' maps."""
    return tempfile.mkdtemp(prefix="rlaunch-test-groups-")


def read_groups(directory: str) -> dict[str, tuple[int, str]]:
    """Any worker's map (every worker collects the same tests); empty when none was written."""
    for path in sorted(Path(directory).glob("*.json")):
        return {nodeid: (rank, group) for nodeid, (rank, group) in json.loads(path.read_text(encoding="utf-8")).items()}
    return {}


def make_scheduler(config: pytest.Config, log: Any, directory: str) -> Any:
    """xdist's load-scope scheduling over these groups, the long units queued first."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        groups: dict[str, tuple[int, str]] | None = None
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:
                self.groups = read_groups(directory)
            return self.groups.get(nodeid, (FAST, nodeid))[1]

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the first assignment: the queue is complete, order it once
                self.ordered = True
                ranks = {group: rank for rank, group in (self.groups or {}).values()}
                units = sorted(self.workqueue.items(), key=lambda unit: (ranks.get(unit[0], FAST), -len(unit[1])))
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return GroupScheduling(config, log)
