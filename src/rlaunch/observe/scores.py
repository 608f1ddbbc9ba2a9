"""An evaluation's score as `rlaunch status` shows it and `rlaunch compare` sets two side by side.

An evaluation step (`rlaunch.evaluation`) writes `report.json` beside its record: the accuracy with
its 95% interval clustered by prompt, n, n_prompts, each prompt's accuracy, the scorer, the sampling
and the identities of the model and data it scored. Reading it writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlaunch import storage
from rlaunch.errors import UserError
from rlaunch.intervals import Accuracy, Difference, difference, pairable
from rlaunch.observe.resolve import RunRef, run_records
from rlaunch.observe.run_files import read_json
from rlaunch.runs.layout import EVALUATION_REPORT


class NoEvaluationError(UserError, LookupError):
    """A reference `rlaunch compare` cannot find an evaluation for."""


@dataclass(frozen=True)
class Score:
    """What an evaluation's report says; `accuracy` is None for a report without the clustered
    interval (written before evaluations clustered by prompt)."""

    report_uri: str
    accuracy: Accuracy | None
    reported_accuracy: float | None = None
    scorer: str | None = None
    sampling: Mapping[str, Any] = field(default_factory=dict)
    model: str | None = None
    data: str | None = None

    def headline(self) -> str:
        """`accuracy 0.412 [0.371, 0.453] (95 %, clustered by prompt; n=1600 completions over 200 prompts)`."""
        a = self.accuracy
        if a is None:
            shown = "-" if self.reported_accuracy is None else f"{self.reported_accuracy:.3f}"
            return (
                f"accuracy {shown} (no interval clustered by prompt in {self.report_uri}: "
                "an older report; run the evaluation again for it)"
            )
        return (
            f"accuracy {a.accuracy:.3f} [{a.low:.3f}, {a.high:.3f}] "
            f"(95 %, clustered by prompt; n={a.n} completions over {a.n_prompts} prompts)"
        )

    def sampling_text(self) -> str:
        s = self.sampling
        if not s:
            return "-"
        how = "greedy" if not s.get("temperature") else f"temperature {s.get('temperature')}"
        return f"{how}, {s.get('samples')} per prompt, at most {s.get('max_new_tokens')} tokens, seed {s.get('seed')}"


def read_score(output_path: str) -> Score | None:
    """The score of the evaluation at `output_path`; None when it wrote no report."""
    uri = storage.join(output_path, EVALUATION_REPORT)
    report = read_json(uri)
    return score_of(report, uri) if isinstance(report, dict) else None


def score_of(report: Mapping[str, Any], uri: str) -> Score:
    """The score an evaluation's report (read from `uri`) says."""
    reported = report.get("accuracy")
    sampling = report.get("sampling")
    return Score(
        report_uri=uri,
        accuracy=_clustered(report),
        reported_accuracy=float(reported) if isinstance(reported, (int, float)) else None,
        scorer=report.get("scorer"),
        sampling=sampling if isinstance(sampling, dict) else {},
        model=report.get("model"),
        data=report.get("data"),
    )


def _clustered(report: Mapping[str, Any]) -> Accuracy | None:
    try:
        low, high = report["accuracy_interval"]
        return Accuracy(
            accuracy=float(report["accuracy"]),
            low=float(low),
            high=float(high),
            stderr=float(report["stderr"]),
            n=int(report["n"]),
            n_prompts=int(report["n_prompts"]),
            per_prompt=tuple(float(p) for p in report.get("per_prompt") or ()),
        )
    except (KeyError, TypeError, ValueError):
        return None


def compared(a: Score, b: Score) -> Difference:
    """B - A, paired by prompt when both scored the same data with as many completions per prompt."""
    if a.accuracy is None or b.accuracy is None:
        older = a if a.accuracy is None else b
        raise NoEvaluationError(
            f"{older.report_uri} has no interval clustered by prompt (an older report); run that evaluation "
            "again to compare it"
        )
    paired = a.data is not None and a.data == b.data and pairable(a.accuracy, b.accuracy)
    return difference(a.accuracy, b.accuracy, paired=paired)


def evaluation_of(ref: RunRef) -> tuple[str, Score]:
    """The evaluation `ref` names: its own report, or, for an RL version (or any model artifact), the
    one evaluation step job under the prefix whose report names it as the model scored."""
    own = read_score(ref.output_path)
    if own is not None:
        return ref.artifact or ref.output_path, own
    if ref.artifact is None or ref.prefix is None:
        raise NoEvaluationError(
            f"{ref.output_path} holds no {EVALUATION_REPORT}: give an evaluation step (name@version or its path)"
        )
    found = evaluations_of(ref.artifact, evaluations(ref.prefix))
    if len(found) != 1:
        listed = ", ".join(name for name, _ in found) or "none"
        raise NoEvaluationError(
            f"{ref.artifact} is not an evaluation, and {len(found)} evaluations under {ref.prefix} scored it "
            f"({listed}); give the evaluation's name@version or path"
        )
    return found[0]


def evaluations(prefix: str) -> list[tuple[str, Score]]:
    """Every evaluation under `prefix` that wrote its report: (its name@version, else its path; its score)."""
    return [
        (_artifact_of(record) or path, score)
        for path, record in run_records(prefix)
        if (score := read_score(path)) is not None
    ]


def evaluations_of(model: str, found: list[tuple[str, Score]]) -> list[tuple[str, Score]]:
    """Those of `found` that scored the artifact `model` (name@version): the whole identity their
    report names, a fingerprint after it, never a version that only starts the same."""
    return [(name, score) for name, score in found if (score.model or "").startswith(model + ":")]


def _artifact_of(record: Mapping[str, Any]) -> str | None:
    attempts = record.get("attempts") or []
    return str(attempts[-1].get("artifact")) if attempts and attempts[-1].get("artifact") else None
