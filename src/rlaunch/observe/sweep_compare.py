"""`rlaunch compare --sweep NAME`: the variants of one sweep side by side.

Each variant is read as the other views read a run: its state as `rlaunch runs` reconciles it, its
steps and reward from every attempt's metrics as `rlaunch plot` merges them (a later attempt wins at
a step both logged), the steps planned from its latest launch document, and its evaluation found as
`rlaunch compare` finds a model's (the one evaluation whose report names the variant's artifact).

GPU-hours used: for each attempt, the gang's devices (none on a `cpu` allocation) from when its
first replica joined (else from the child gang's submission) to the attempt's end, or to now while
it runs: what the allocation held, not what the plan allowed.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from rlaunch.errors import UserError
from rlaunch.observe.collect import final_step, launch_document
from rlaunch.observe.plot import attempt_series, merged
from rlaunch.observe.resolve import RunRef, run_records
from rlaunch.observe.run_list import summary
from rlaunch.observe.run_status import TERMINAL_STATES
from rlaunch.observe.scores import Score, evaluations, evaluations_of
from rlaunch.observe.sweeps import MalformedSweepError, sweep_of
from rlaunch.runs.layout import run_record
from rlaunch.statefiles import CorruptStateError

Curve = tuple[tuple[int, float], ...]  # (optimizer step, reward_mean)


class NoSweepError(UserError, LookupError):
    """A sweep name no run record under the prefix carries."""


@dataclass(frozen=True)
class VariantResult:
    """One variant's row; `evaluation_note` says why a variant has no score shown though it was
    evaluated (several evaluations scored it)."""

    variant: str
    settings: Mapping[str, Any]
    artifact: str | None
    output_path: str
    state: str
    steps_done: int | None  # the latest training step logged, over every attempt
    steps_planned: int | None  # trainer.max_training_steps of its latest attempt's document
    final_reward: float | None  # reward_mean at the latest step that logged one
    evaluation: str | None
    score: Score | None
    evaluation_note: str | None
    gpu_hours: float
    rewards: Curve  # what the plot draws

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        del data["rewards"]  # the plot holds the curve; the row holds its last point
        data["settings"] = dict(self.settings)
        if self.score is not None:
            data["score"]["headline"] = self.score.headline()
        return data


@dataclass(frozen=True)
class SweepComparison:
    """The variants of sweep `name` by label; `problems`: run records under the prefix that could be
    one of its variants but cannot be read as one (a damaged record, a malformed `sweep` field)."""

    name: str
    variants: tuple[VariantResult, ...]
    problems: tuple[str, ...] = ()


def compare_sweep(prefix: str, name: str, now: datetime.datetime | None = None) -> SweepComparison:
    """The variants of the sweep `name` under `prefix`; NoSweepError when no record carries it.
    Only the variants' jobs are asked for their state."""
    damaged: list[CorruptStateError] = []
    members: list[tuple[dict[str, Any], RunRef]] = []
    problems: list[str] = []
    known: set[str] = set()
    for path, record in run_records(prefix, damaged):
        try:
            member = sweep_of(record, run_record(path))
        except MalformedSweepError as exc:
            problems.append(str(exc))
            continue
        known |= {member.name} if member else set()
        if member is not None and member.name == name and (row := summary(path, record, prefix)) is not None:
            members.append((row, RunRef(output_path=path, prefix=prefix, artifact=row["artifact"], record=record)))
    if not members:
        raise NoSweepError(
            f"no run under {prefix} is a variant of sweep {name!r}; sweeps there: {', '.join(sorted(known)) or 'none'} "
            "(`rlaunch runs` shows each sweep's name above its variants)"
        )
    members.sort(key=lambda found: (found[0]["sweep"]["variant"], found[0]["output_path"]))
    scored = evaluations(prefix)
    at = now or datetime.datetime.now(datetime.UTC)
    variants = tuple(_variant(row, ref, scored, at) for row, ref in members)
    return SweepComparison(name, variants, tuple([str(exc) for exc in damaged] + problems))


def _variant(
    row: dict[str, Any], ref: RunRef, scored: list[tuple[str, Score]], now: datetime.datetime
) -> VariantResult:
    points = merged(attempt_series(ref))
    rewards = tuple((p["step"], float(p["reward_mean"])) for p in points if _number(p.get("reward_mean")))
    latest = ref.attempt() or {}
    doc, _ = launch_document(latest, ref.output_path) if latest else (None, None)
    evaluated = evaluations_of(ref.artifact, scored) if ref.artifact else []
    only = evaluated[0] if len(evaluated) == 1 else None
    several = ", ".join(sorted(name for name, _ in evaluated)) if len(evaluated) > 1 else None
    return VariantResult(
        variant=row["sweep"]["variant"],
        settings=row["sweep"]["settings"],
        artifact=ref.artifact,
        output_path=ref.output_path,
        state=row["state"],
        steps_done=_training_step(points[-1]) if points else None,
        steps_planned=final_step(doc),
        final_reward=rewards[-1][1] if rewards else None,
        evaluation=only[0] if only else None,
        score=only[1] if only else None,
        evaluation_note=f"{len(evaluated)} evaluations scored it ({several}): compare them by name"
        if several
        else None,
        gpu_hours=gpu_hours((ref.record or {}).get("attempts") or [], row["state"] not in TERMINAL_STATES, now),
        rewards=rewards,
    )


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _training_step(point: Mapping[str, Any]) -> int:
    """The training step a metrics line reached (runtimes with several optimizer steps per training
    step log it beside the optimizer step)."""
    training = point.get("training_step")
    return int(training) if _number(training) else int(point["step"])


def gpu_hours(attempts: Sequence[Mapping[str, Any]], running: bool, now: datetime.datetime) -> float:
    """Device-hours the attempts' gangs held (see the module's docstring); `running`: the latest
    attempt still holds its gang, counted to `now`. An attempt whose times are missing or unreadable
    adds nothing."""
    total = 0.0
    for index, attempt in enumerate(attempts):
        allocation = attempt.get("allocation") or attempt.get("topology") or {}
        nodes, devices = allocation.get("num_nodes"), allocation.get("gpus_per_node")
        if str(allocation.get("gpu_variant", "")).lower() == "cpu" or not (_number(nodes) and _number(devices)):
            continue
        phases = attempt.get("phases") or {}
        joined = [
            moment
            for phase, at in phases.items()
            if phase.startswith("replica_") and phase.endswith("_joined") and (moment := _moment(at)) is not None
        ]
        start = min(joined) if joined else _moment(phases.get("child_submitted"))
        ended = attempt.get("finished_at") or phases.get("finished")
        open_now = running and index == len(attempts) - 1
        end = _moment(ended) if ended else (now if open_now else None)
        if start is not None and end is not None and end > start:
            total += nodes * devices * (end - start).total_seconds() / 3600
    return total


def _moment(value: Any) -> datetime.datetime | None:
    try:
        moment = datetime.datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


def default_plot_path(name: str) -> str:
    """`<sweep name>-rewards.png` in the working directory (a sweep's name holds no path separator)."""
    return f"{name}-rewards.png"
