"""The gate authorisations a submission carries, from the command line to the coordinator.

`--retry REASON`, `--skip-smoke-gate REASON` and `--waive GATE=REASON` are parsed into a `Given`
(an empty reason is refused where it is parsed). The judgement reads them as `Authorisations`; the
coordinator gets them once, stamped with who gave them and when (`RLAUNCH_AUTHORISED`), and each
launch document it renders carries them into the host's judgement and the run record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlaunch import storage
from rlaunch.judgement.gates import AUTHORISED_ENV
from rlaunch.judgement.judge import Authorisations
from rlaunch.processes import actor
from rlaunch.secrets import scrub


@dataclass(frozen=True)
class Given:
    """What the operator authorised for this submission, each with its reason."""

    retry: str | None = None
    skip_smoke_gate: str | None = None
    waivers: Mapping[str, str] = field(default_factory=dict)  # gate -> reason
    # The terminal stage when it came from the experiment's default, with how to choose it.
    default_stage: str | None = None

    def judged(self) -> Authorisations:
        """The authorisations the judgement reads."""
        return Authorisations(
            retry=self.retry is not None,
            skip_smoke_gate=self.skip_smoke_gate is not None,
            default_stage=self.default_stage,
            waivers=dict(self.waivers),
        )

    def environment(self) -> dict[str, str]:
        """For the coordinator: each authorisation with its reason (scrubbed), who and when, stamped once."""

        def stamp(reason: str) -> dict[str, Any]:
            return {"reason": scrub(reason), "by": actor(), "at": storage.utc_now()}

        given: dict[str, Any] = {
            name: stamp(reason)
            for name, reason in (("retry", self.retry), ("skip_smoke_gate", self.skip_smoke_gate))
            if reason is not None
        }
        if self.waivers:
            given["waivers"] = {gate: stamp(reason) for gate, reason in self.waivers.items()}
        return {AUTHORISED_ENV: json.dumps(given)} if given else {}
