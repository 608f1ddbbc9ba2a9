"""A skipped smoke gate, kept in the run record (`submit` records it once the coordinator is submitted).

An RL step built with `skyrl_step(..., smoke=<smoke step>)` is submitted only when that smoke's
stored run passes `verify-smoke` and parity holds between the two (`rlaunch.judgement.judge`).
`--skip-smoke-gate "<reason>"` submits anyway; the reason, who and when, and what the judgement
found are kept in the large run's run record (`smoke_gate_overrides`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlaunch import storage
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.processes import actor
from rlaunch.runs.run_record import add_entry
from rlaunch.secrets import scrub

if TYPE_CHECKING:
    from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep


def record_override(document: SkyRLLaunchConfig, step: SkyRLArtifactStep, reason: str, problems: list[str]) -> None:
    """Keep the skip in the run record of `document`, the launch `step` is about to hand the host."""
    add_entry(
        document.artifacts.output_path,
        document.run.id,
        "smoke_gate_overrides",
        {
            "smoke": step.smoke.identity if step.smoke is not None else None,
            "reason": scrub(reason),
            "problems": [scrub(p) for p in problems],
            "by": actor(),
            "at": storage.utc_now(),
        },
    )
