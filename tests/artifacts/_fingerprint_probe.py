"""A small graph whose fingerprints are compared across processes (see test_fingerprint.py).

Run with runpy in the test process and in fresh interpreters with other hash seeds, prefixes,
regions and working directories; every process must print the same fingerprints.
"""

from __future__ import annotations

import datetime
import enum
import json
import pathlib
from dataclasses import dataclass, field

from rlaunch.artifacts import ArtifactStep, Directory


class Precision(enum.Enum):
    BF16 = "bf16"
    FP32 = "fp32"


@dataclass(frozen=True)
class Optim:
    lr: float
    betas: tuple[float, float] = (0.9, 0.95)
    tags: frozenset[str] = field(default_factory=lambda: frozenset({"adam", "fused", "zero", "w", "q"}))


def _noop(config):
    return None


def build_graph():
    data = ArtifactStep(
        name="data/toy",
        version="2026.11.30",
        artifact_type=Directory,
        run=_noop,
        build_config=lambda ctx: {"out": ctx.output_path, "rows": 1000, "split": {"train": 0.9, "test": 0.1}},
    )
    model = ArtifactStep(
        name="models/tiny",
        version="2026.11.30.1",
        artifact_type=Directory,
        run=_noop,
        build_config=lambda ctx: {
            "data": ctx.artifact_path(data),
            "where": [ctx.prefix, ctx.region, ctx.output_path],
            "nodes": ctx.runtime_arg("nodes"),
            "optim": Optim(lr=3e-4),
            "precision": Precision.BF16,
            "labels": {"z", "y", "x", "w", "v", "u"},
            "path": pathlib.PurePosixPath("a/b"),
            "when": datetime.date(2026, 11, 30),
            "timeout": datetime.timedelta(hours=2),
            "unicode": "naïve — ☃",
            "big": 2**70,
            "tiny": 1e-300,
        },
        deps=(data,),
        runtime_args={"nodes": 4},
    )
    return [data, model]


def fingerprints() -> dict[str, str]:
    return {step.identity: step.fingerprint for step in build_graph()}


if __name__ == "__main__":
    print(json.dumps(fingerprints(), sort_keys=True))
