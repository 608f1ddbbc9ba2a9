"""What `--run` refuses a planned document with: the one judgement over the evidence storage holds."""

from __future__ import annotations

from rlaunch.judgement.judge import Authorisations, judge
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.observe.launch_evidence import launch_evidence


def run_refusals(document: SkyRLLaunchConfig, *gates: str) -> list[str]:
    """The refusal lines of `judge` for launching `document` now (as --run and the host say them),
    of the named gates only (every gate when none is named)."""
    planned = PlannedLaunch.of(document)
    findings = judge(planned, launch_evidence(planned), Authorisations())
    return [f.line() for f in findings if f.refuses and (not gates or f.gate in gates)]
