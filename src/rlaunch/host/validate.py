"""Validate a launch document at the host with the one rule set: it may have been written by hand.

`rlaunch launch --config` applies every rule the preflight applies (`rlaunch.rules`: topology
arithmetic, batches, runtime capabilities, recipe rules) to the document before anything is
submitted, so a hand-written document gets the verdict its experiment would have got. Each
violation keeps its code; its fields are translated to the document's own paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlaunch import rules
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.geometry import CRITIC_KEYS, ROLE_PLAN_KEYS
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.launch_config.typed import DocumentError
from rlaunch.rules.document_subject import document_subject
from rlaunch.runtimes.registry import UnknownRuntimeError

# Where the experiment side's fields live in a launch document (longest prefix first).
_DOCUMENT_PATHS = (
    ("config_yaml.entrypoint", "runtime.entrypoint"),
    ("model.tokenizer_revision", "inputs.model.tokenizer_revision"),
    ("execution.wandb_entity", "cluster.wandb_entity"),
    ("config_yaml", "skyrl"),
    ("topology", "cluster.allocation"),
    ("role_plan", "skyrl"),
)


class DocumentRefused(DocumentError):
    """The rules refused a launch document; each violation keeps its code, values and fix."""

    def __init__(self, violations: Sequence[rules.Violation]) -> None:
        self.violations = tuple(violations)
        super().__init__([v.line(document_fields(v)) for v in self.violations], what="launch document")

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {
                "code": v.code,
                "fields": list(document_fields(v)),
                "values": dict(v.values),
                "message": v.message,
                "fix": v.fix,
            }
            for v in self.violations
        ]


def document_fields(v: rules.Violation) -> tuple[str, ...]:
    return tuple(document_path(f) for f in v.fields)


def document_path(field: str) -> str:
    """The launch-document path of a rule's field (`role_plan.train_batch_size` -> `skyrl.trainer.train_batch_size`)."""
    head, _, name = field.partition(".")
    if head == "role_plan" and name in ROLE_PLAN_KEYS:
        return f"skyrl.{ROLE_PLAN_KEYS[name]}"
    critic = name.removeprefix("critic.")
    if head == "role_plan" and name.startswith("critic.") and critic in CRITIC_KEYS:
        return f"skyrl.{CRITIC_KEYS[critic]}"
    for prefix, path in _DOCUMENT_PATHS:
        if field == prefix or field.startswith(prefix + "."):
            return path + field[len(prefix) :]
    return field


def planned_launch(doc: SkyRLLaunchConfig) -> PlannedLaunch:
    """The document with what the host derives from it, once: its profile, its recipe composed on
    the profile's base config, the geometry and the memory table (an unknown runtime: DocumentError)."""
    try:
        return PlannedLaunch.of(doc)
    except UnknownRuntimeError as exc:
        raise DocumentError([f"runtime.profile: {exc}"]) from None


def validate_planned(planned: PlannedLaunch) -> None:
    """Every violation of a planned launch's document at once (DocumentRefused), before anything is
    submitted; the rules read the composition the planned launch holds."""
    doc, composed = planned.document, planned.composed
    subject = document_subject(doc, planned.profile, composed)
    violations = rules.check(subject, doc.skyrl, (composed, planned.problems, planned.geometry))
    violations += rules.wandb_entity(composed, doc.cluster.wandb_entity, "cluster.wandb_entity in the document")
    if violations:
        raise DocumentRefused(violations)


def validate_document(doc: SkyRLLaunchConfig) -> dict[str, Any]:
    """`validate_planned` of a document; returns its recipe composed onto its runtime's base config."""
    planned = planned_launch(doc)
    validate_planned(planned)
    return planned.composed
