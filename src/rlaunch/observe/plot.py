"""Reward, loss and KL against optimizer step, and a sweep's reward curves, as PNGs (matplotlib is
imported only here, when a plot is drawn)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rlaunch.observe.resolve import RunRef
from rlaunch.observe.run_files import read_document, read_metrics


@dataclass
class Series:
    attempt_id: str
    records: list[dict[str, Any]]


def attempt_series(ref: RunRef, only_attempt: str | None = None) -> list[Series]:
    """Every attempt's full metrics log, in attempt order (or just `only_attempt`)."""
    from rlaunch.runs.layout import METRICS, attempt_dir

    out = []
    for attempt in (ref.record or {}).get("attempts") or []:
        attempt_id = attempt.get("attempt_id")
        if only_attempt and attempt_id != only_attempt:
            continue
        doc = None
        for key in ("resolved_config_uri", "launch_document_uri"):
            if attempt.get(key):
                doc = read_document(attempt[key])
                if doc:
                    break
        if doc is None or not attempt_id:
            continue
        root = doc.artifacts.attempts_root
        log = read_metrics(f"{attempt_dir(root, attempt_id).rstrip('/')}/{METRICS}", limit=None)
        if log.records:
            out.append(Series(attempt_id, log.records))
    return out


def merged(series: list[Series]) -> list[dict[str, Any]]:
    """One trajectory: a later attempt's record replaces an earlier one at the same step."""
    by_step: dict[int, dict[str, Any]] = {}
    for s in series:
        for record in s.records:
            by_step[record["step"]] = {**record, "attempt_id": s.attempt_id}
    return [by_step[k] for k in sorted(by_step)]


def draw(series: list[Series], title: str, out_path: str) -> list[str]:
    """Write the PNG; returns the panels drawn (a metric no record carries is left out)."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    points = merged(series)
    panels = [
        (key, label)
        for key, label in (("reward_mean", "reward"), ("loss", "loss"), ("kl", "KL"))
        if any(p.get(key) is not None for p in points)
    ]
    if not panels:
        raise ValueError("the metrics carry none of reward_mean, loss, kl")
    fig, axes = plt.subplots(len(panels), 1, figsize=(7, 2.4 * len(panels) + 0.6), sharex=True, squeeze=False)
    boundaries = [s.records[0]["step"] for s in series[1:]]
    for ax, (key, label) in zip(axes[:, 0], panels):
        xs = [p["step"] for p in points if p.get(key) is not None]
        ys = [p[key] for p in points if p.get(key) is not None]
        ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.2)
        if key == "reward_mean" and any(p.get("reward_std") is not None for p in points):
            band = [
                (p["step"], p["reward_mean"], p.get("reward_std") or 0.0)
                for p in points
                if p.get("reward_mean") is not None
            ]
            ax.fill_between(
                [b[0] for b in band], [b[1] - b[2] for b in band], [b[1] + b[2] for b in band], alpha=0.2, linewidth=0
            )
        for step in boundaries:
            ax.axvline(step, color="grey", linestyle="--", linewidth=0.8)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
    axes[-1, 0].set_xlabel("optimizer step")
    axes[-1, 0].xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out_path, format="png", dpi=110)
    plt.close(fig)
    return [label for _, label in panels]


def draw_rewards(curves: Sequence[tuple[str, Sequence[tuple[int, float]]]], title: str, out_path: str) -> int:
    """Write one PNG with a reward curve per (label, points), on one axis so variants compare at a
    glance; returns the curves drawn (a label without points is left out)."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    drawn = [(label, points) for label, points in curves if points]
    if not drawn:
        raise ValueError("no curve has a point: no variant logged reward_mean")
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, points in drawn:
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, linewidth=1.2, label=label)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("reward")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out_path, format="png", dpi=110)
    plt.close(fig)
    return len(drawn)


def _pyplot() -> Any:
    """matplotlib's pyplot without a display (ModuleNotFoundError without the `plot` extra)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
