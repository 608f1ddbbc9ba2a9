"""The rehearsal report: how far a rehearsal runtime's trainer got on logical GPUs, and where it stopped.

A rehearsal runtime (`rehearsal: true` in its profile) runs the real trainer on a gang whose GPUs
are logical (declared to Ray, not built for): it is expected to get through configuration, Ray,
data and placement, and to stop at its first GPU-only import. The gang's head writes this report
as `rehearsal.json` in the attempt directory when, and only when, the run ended that way; the
host then records the attempt as `rehearsed` (no terminal manifest) and prints `render(report)`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, cast

from rlaunch import storage
from rlaunch.runs.layout import attempt_dir

REPORT_FILE = "rehearsal.json"
REHEARSED = "rehearsed"


@dataclass(frozen=True)
class Milestone:
    name: str
    reached: bool
    evidence: str  # the driver line or the Ray table entry that shows it, or why it is missing


@dataclass(frozen=True)
class PlacedGroup:
    """A placement group Ray placed, as its table showed it when the driver had ended."""

    id: str
    strategy: str
    state: str  # CREATED, or REMOVED once its driver exited (Ray keeps where its bundles were)
    gpus_by_rank: dict[int, float]  # the rank's node (`rlaunch-rank` label) -> GPUs of bundles placed there
    bundles: int


@dataclass(frozen=True)
class RehearsalReport:
    runtime_profile: str
    milestones: tuple[Milestone, ...]
    placement_group: PlacedGroup | None
    spans_nodes: bool  # the group holds logical GPUs on every node of the gang
    missing_module: str  # the GPU-only module whose import ended the rehearsal
    stop: str  # the driver's line naming it
    where: str  # the traceback's innermost frame: "package/file.py:13: the import"
    driver_seconds: float
    written_at: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RehearsalReport:
        group = data.get("placement_group")
        return cls(
            runtime_profile=data["runtime_profile"],
            milestones=tuple(Milestone(**m) for m in data["milestones"]),
            placement_group=PlacedGroup(
                **{**group, "gpus_by_rank": {int(k): float(v) for k, v in group["gpus_by_rank"].items()}}
            )
            if group
            else None,
            spans_nodes=bool(data["spans_nodes"]),
            missing_module=data["missing_module"],
            stop=data["stop"],
            where=data.get("where", ""),
            driver_seconds=float(data["driver_seconds"]),
            written_at=data["written_at"],
        )


def report_url(attempts_root: str, attempt_id: str) -> str:
    return storage.join(attempt_dir(attempts_root, attempt_id), REPORT_FILE)


def read_report(attempts_root: str, attempt_id: str) -> RehearsalReport | None:
    """The attempt's rehearsal report, or None when its head wrote none."""
    url = report_url(attempts_root, attempt_id)
    if not storage.exists(url):
        return None
    data = cast(dict[str, Any], storage.read_json(url))  # the report the head wrote: one JSON object
    return RehearsalReport.from_json(data)


def render(report: RehearsalReport) -> str:
    """The report for people: each milestone, the placement, and the stop."""
    lines = [f"rehearsal of runtime {report.runtime_profile}: {len(report.milestones)} milestone(s)"]
    for m in report.milestones:
        lines.append(f"  [{'ok' if m.reached else '--'}] {m.name}: {m.evidence}")
    group = report.placement_group
    if group is not None:
        per_node = ", ".join(f"rank {rank}: {gpus:g} GPU" for rank, gpus in sorted(group.gpus_by_rank.items()))
        spans = "spans every node" if report.spans_nodes else "does NOT span every node"
        lines.append(
            f"  placement group {group.id[:12]} ({group.strategy}, {group.bundles} bundles, {group.state}): {per_node}; {spans}"
        )
    lines.append(
        f"  stopped after {report.driver_seconds:.0f}s at the GPU-only module {report.missing_module!r}: {report.stop}"
    )
    if report.where:
        lines.append(f"    at {report.where}")
    return "\n".join(lines)
