"""The smoke gate: a large launch goes only after a matching smoke passed.

An RL step built with `skyrl_step(..., smoke=<smoke step>)` is submitted only when that smoke's
stored run passes `verify-smoke` and parity holds between the two (`rlaunch.skyrl.parity`).
`--skip-smoke-gate "<reason>"` submits anyway; the reason, who and when are kept in the large
run's run record (`smoke_gate_overrides`).
"""

from __future__ import annotations

from typing import Any

from rlaunch import storage
from rlaunch.processes import actor
from rlaunch.runs.run_record import add_gate_override
from rlaunch.secrets import scrub
from rlaunch.skyrl.parity import differences, shape_of_document


def gate_problems(step: Any, prefix: str) -> list[str]:
    """Why `step` may not be submitted yet (empty: its smoke passed and parity holds, or it is a
    small launch that declares none)."""
    from rlaunch.skyrl.gate_checks import undeclared_smoke

    smoke, document = step.smoke, step.planned_document(prefix)
    if smoke is None:
        problem = undeclared_smoke(document)
        return [f"{step.identity}: {problem}"] if problem else []
    found = differences(shape_of_document(smoke.planned_document(prefix)), shape_of_document(document))
    problems = [f"parity with smoke {smoke.identity}: {d.line()}" for d in found]
    problems += _verdict_problems(smoke.identity, prefix)
    return [f"{step.identity}: {p}" for p in problems]


def _verdict_problems(identity: str, prefix: str) -> list[str]:
    from rlaunch.observe.collect import collect
    from rlaunch.observe.resolve import RunNotFoundError, resolve
    from rlaunch.observe.verdict import smoke_verdict

    try:
        ref = resolve(identity, prefix)
    except RunNotFoundError:
        return [f"smoke {identity} has not run under {prefix}; launch it first and check it with rlaunch verify-smoke"]
    verdict = smoke_verdict(collect(ref, identity))
    return [f"smoke {identity} does not pass verify-smoke: {c.name}: {c.evidence}" for c in verdict.failed]


def record_override(step: Any, prefix: str, reason: str, problems: list[str]) -> None:
    document = step.planned_document(prefix)
    add_gate_override(
        document.artifacts.output_path,
        document.run.id,
        {
            "smoke": step.smoke.identity if step.smoke is not None else None,
            "reason": scrub(reason),
            "problems": [scrub(p) for p in problems],
            "by": actor(),
            "at": storage.utc_now(),
        },
    )
