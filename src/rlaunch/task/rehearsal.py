"""The head's side of a rehearsal (a runtime profile with `rehearsal: true`, e.g. `fsdp-rehearsal`).

While the trainer driver runs, a `ray_probe.py placement-groups` watcher follows Ray's
placement-group table (bundles mapped to nodes by their `rlaunch-rank` label), because a driver's
groups leave the table's placed state when the driver exits. When the driver fails, `conclude`
decides whether that was the expected end of a rehearsal: the driver's output names a missing
GPU-only module (`GPU_ONLY_MODULES`) *and* the trainer's placement group held logical GPUs on
every node of the gang. Only then is a `RehearsalReport` written and the gang's outcome is
`rehearsed`; any other failure stays a failure.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

from rlaunch.launch_config.rehearsal import Milestone, PlacedGroup, RehearsalReport
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
POLL_SECONDS = 1.0


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
    """A `ray_probe.py placement-groups` entry as GPUs per rank; None unless it asks for GPUs and is
    placed (state CREATED: a removed group may still name the nodes it was on)."""
    if entry.get("state") != "CREATED":
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


class PlacementWatcher:
    """Follows the placement-group table while the driver runs; keeps the widest GPU group seen."""

    def __init__(self, python: str, env: Mapping[str, str], gcs: str):
        self.best: PlacedGroup | None = None
        self._proc = subprocess.Popen(
            [python, PROBE, "placement-groups", gcs, str(POLL_SECONDS)],
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            try:
                groups = json.loads(line).get("placement_groups")
            except ValueError:
                continue
            for entry in groups or ():
                group = placed_group(entry)
                if group is not None and (self.best is None or len(group.gpus_by_rank) >= len(self.best.gpus_by_rank)):
                    self.best = group

    def stop(self) -> PlacedGroup | None:
        self._proc.kill()
        self._proc.wait()
        self._reader.join(timeout=5)
        return self.best


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
