"""The head's side of a rehearsal (a runtime profile with `rehearsal: true`, e.g. `fsdp-rehearsal`).

When the trainer driver has ended, and while the gang's Ray still runs, `placed_groups` reads
Ray's placement-group table once (`ray_probe.py placement-groups`; bundles mapped to nodes by
their `rlaunch-rank` label). Ray keeps the groups of a driver that has exited, marked removed,
with the nodes their bundles were on and whether their placement finished, so this one read sees
every group the driver placed, however briefly it lived. (Sampling the table while the driver ran
missed SkyRL's 4-bundle group when it lived less than a poll: the driver dies within seconds of
placing it; what was left was SkyRL's peer-access check, one 2-GPU bundle on one node, and a
steady run read as a group on one rank.) `conclude` then decides whether the driver's failure was
the expected end of a rehearsal: its output names a missing GPU-only module (`GPU_ONLY_MODULES`)
*and* a placement group of the trainer held logical GPUs on every node of the gang. Only then is a
`RehearsalReport` written and the gang's outcome is `rehearsed`; any other failure stays a failure.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from rlaunch.runs.rehearsal_report import Milestone, PlacedGroup, RehearsalReport
from rlaunch.storage import utc_now
from rlaunch.task.ray_node import PROBE

# Modules that only install with a GPU build (CUDA kernels): importing one is as far as a
# rehearsal on logical GPUs can get.
GPU_ONLY_MODULES = ("flash_attn", "vllm", "transformer_engine")
_MISSING = re.compile(r"\b(?:ModuleNotFoundError|ImportError): No module named '([\w.]+)'")
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# What SkyRL 0.4.0's driver prints at each step of `main_base`, patterns in order of preference
# (the first line matching the first pattern that matches at all is the evidence). `validate_cfg`
# runs before `initialize_ray`, so a line of the latter shows the config passed.
MILESTONES: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...] = (
    (
        "config validated",
        (re.compile(r"Infrastructure logs will be written to"), re.compile(r"Connected to Ray cluster")),
    ),
    (
        "attached to the gang's Ray cluster",
        (
            re.compile(r"Using address \S+ set in the environment variable RAY_ADDRESS"),
            re.compile(r"Connected to Ray cluster"),
        ),
    ),
    ("data loaded", (re.compile(r"Total dataset size: \d+"),)),
)
PLACED = "placement group created across the gang"
TAIL_LINES = 4000
PROBE_TIMEOUT = 120.0


def missing_gpu_module(lines: Sequence[str]) -> tuple[str, str, str] | None:
    """(module, line, where) of the last import error naming a GPU-only module (the one the driver
    died of; warnings about optional imports come earlier), else None. `where` is the traceback's
    innermost frame ("package/file.py:13: import statement"), or "" when there is none."""
    for index in range(len(lines) - 1, -1, -1):
        match = _MISSING.search(lines[index])
        if match and match.group(1).split(".")[0] in GPU_ONLY_MODULES:
            return match.group(1).split(".")[0], lines[index].strip(), _innermost_frame(lines[:index])
    return None


def _innermost_frame(lines: Sequence[str]) -> str:
    for index in range(len(lines) - 1, max(-1, len(lines) - 8), -1):
        frame = _FRAME.search(lines[index])
        if frame:
            code = lines[index + 1].strip() if index + 1 < len(lines) else ""
            return f"{frame.group(1).rpartition('site-packages/')[2]}:{frame.group(2)}: {code}"
    return ""


class OutputTail:
    """The driver's last lines, without terminal colour codes (what the report's evidence is read from)."""

    def __init__(self, size: int = TAIL_LINES):
        self.lines: deque[str] = deque(maxlen=size)

    def __call__(self, line: str) -> None:
        self.lines.append(_ANSI.sub("", line))


def milestones(lines: Sequence[str], group: PlacedGroup | None, spans: bool) -> tuple[Milestone, ...]:
    """Each step of the driver: reached (with the line that shows it) or not seen."""
    out = []
    for name, patterns in MILESTONES:
        hits = (next((line.strip() for line in lines if p.search(line)), None) for p in patterns)
        hit = next((h for h in hits if h is not None), None)
        out.append(Milestone(name, hit is not None, hit or "not seen in the driver's output"))
    if group is None:
        out.append(Milestone(PLACED, False, "no placement group with GPU bundles appeared in Ray's table"))
    else:
        per_node = ", ".join(f"rank {r}: {g:g} GPU" for r, g in sorted(group.gpus_by_rank.items()))
        out.append(Milestone(PLACED, spans, f"{group.strategy}, {group.bundles} bundles of GPU, {per_node}"))
    return tuple(out)


def placed_group(entry: Mapping[str, Any]) -> PlacedGroup | None:
    """A `ray_probe.py placement-groups` entry as GPUs per rank; None unless it asks for GPUs and
    Ray finished placing it (`created`: it may have been removed since, with its driver)."""
    if not entry.get("created"):
        return None
    gpus: dict[int, float] = {}
    bundles = 0
    for bundle in entry.get("bundles", []):
        wanted = float(bundle.get("resources", {}).get("GPU", 0))
        if wanted <= 0:
            continue
        bundles += 1
        if bundle.get("rank") is None:
            return None  # not (or no longer) placed
        gpus[int(bundle["rank"])] = gpus.get(int(bundle["rank"]), 0.0) + wanted
    if not bundles:
        return None
    return PlacedGroup(
        id=str(entry["id"]),
        strategy=str(entry["strategy"]),
        state=str(entry["state"]),
        gpus_by_rank=gpus,
        bundles=bundles,
    )


def spans_gang(group: PlacedGroup, world: int, gpus_per_node: int) -> bool:
    """The group holds logical GPUs on every node of the gang, and no more than a node declares."""
    return set(group.gpus_by_rank) == set(range(world)) and all(g <= gpus_per_node for g in group.gpus_by_rank.values())


def placed_groups(python: str, env: Mapping[str, str], gcs: str) -> list[PlacedGroup]:
    """Every GPU group Ray has placed in the cluster at `gcs` (one read of its table);
    RuntimeError saying why when the table cannot be read."""
    try:
        done = subprocess.run(
            [python, PROBE, "placement-groups", gcs],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"Ray's placement-group table at {gcs} was not read within {PROBE_TIMEOUT:g}s") from None
    for line in done.stdout.splitlines():
        if line.startswith('{"placement_groups"'):
            groups = (placed_group(entry) for entry in json.loads(line)["placement_groups"])
            return [group for group in groups if group is not None]
    detail = (done.stdout + done.stderr).strip()[-500:]
    raise RuntimeError(f"cannot read Ray's placement-group table at {gcs} (exit {done.returncode}): {detail}")


def widest(groups: Sequence[PlacedGroup]) -> PlacedGroup | None:
    """The group on the most nodes (then with the most GPU bundles): the trainer's, if any spans the gang."""
    return max(groups, key=lambda g: (len(g.gpus_by_rank), g.bundles), default=None)


def conclude(
    profile: str, lines: Sequence[str], group: PlacedGroup | None, *, world: int, gpus_per_node: int, seconds: float
) -> RehearsalReport | None:
    """The rehearsal report when the driver's failure is a rehearsal's expected end, else None."""
    stop = missing_gpu_module(lines)
    if stop is None or group is None or not spans_gang(group, world, gpus_per_node):
        return None
    return RehearsalReport(
        runtime_profile=profile,
        milestones=milestones(lines, group, True),
        placement_group=group,
        spans_nodes=True,
        missing_module=stop[0],
        stop=stop[1],
        where=stop[2],
        driver_seconds=round(seconds, 1),
        written_at=utc_now(),
    )


def why_not_rehearsed(lines: Sequence[str], group: PlacedGroup | None, *, world: int, gpus_per_node: int) -> str:
    """Why a rehearsal's failure is a failure (for the outcome's reason)."""
    if missing_gpu_module(lines) is None:
        return f"the driver stopped before importing a GPU-only module ({', '.join(GPU_ONLY_MODULES)})"
    if group is None:
        return "the driver reached a GPU-only import, but no placement group with GPU bundles was placed"
    return (
        f"the driver reached a GPU-only import, but its placement group held GPUs on ranks {sorted(group.gpus_by_rank)}, "
        f"not on all {world} node(s) (at most {gpus_per_node} each)"
    )
