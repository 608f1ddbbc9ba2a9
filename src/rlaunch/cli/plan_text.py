"""Rendering the plan of a graph as text for people and JSON for tools."""

from __future__ import annotations

import json
from typing import Any

from rlaunch.artifacts.fingerprint import short
from rlaunch.artifacts.plan import PlannedStep

ACTION_LABEL = {
    "run": "run",
    "serve": "serve from storage",
    "rebuild": "rebuild (mutable)",
    "unneeded": "not needed",
}


def _details(planned: list[PlannedStep], prefix: str) -> list[tuple[str, list[str]]]:
    return [(p.step.identity, p.step.describe(prefix)) for p in planned if p.step.describe is not None]


def plan_text(planned: list[PlannedStep], prefix: str, terminal: list[str]) -> str:
    lines: list[str] = []
    for identity, detail in _details(planned, prefix):
        lines.append(f"== {identity} ==")
        lines.extend(detail)
        lines.append("")
    lines.append(f"Terminal step(s): {', '.join(terminal)}")
    lines.append(f"Plan ({len(planned)} steps, prefix {prefix}):")
    width = max(len(p.step.identity) for p in planned)
    action_width = max(len(ACTION_LABEL[p.action]) for p in planned)
    for p in planned:
        lines.append(
            f"  {p.step.identity:<{width}}  {short(p.step.fingerprint)}  {ACTION_LABEL[p.action]:<{action_width}}  {p.path}"
        )
    lines.append("")
    lines.append("Resolved versions:")
    for p in planned:
        suffix = "  (mutable — rebuilds every run)" if p.step.mutable else ""
        lines.append(f"  {p.step.identity}{suffix}")
    return "\n".join(lines)


def plan_json(planned: list[PlannedStep], prefix: str, terminal: list[str]) -> str:
    payload: dict[str, Any] = {
        "prefix": prefix,
        "terminal": terminal,
        "steps": [p.to_json() for p in planned],
        "details": {identity: detail for identity, detail in _details(planned, prefix)},
        "facts": {p.step.identity: dict(p.step.facts(prefix)) for p in planned if p.step.facts},
        "resolved_versions": [p.step.identity for p in planned],
    }
    return json.dumps(payload, indent=2)
