"""The judgement's edges over a declared smoke's evidence: the smoke's runtime is its latest
attempt's, not its first; and a served version launches nothing, so nothing of it is judged."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rlaunch.judgement.gates import smoke_record_problem
from rlaunch.judgement.judge import Authorisations, Evidence, SmokeEvidence, judge, smoke_problems
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config import schema

SMOKE = "checkpoints/gsm8k-grpo-smoke@2026.12.01"
OTHER = "f" * 64


@pytest.fixture
def launch(document: dict[str, Any]) -> PlannedLaunch:
    """The 64-GPU launch under a mutable version, declaring a smoke and a credential, without the skip."""
    data = copy.deepcopy(document)
    data["run"]["artifact"] = "checkpoints/gsm8k-grpo@dev"
    data["run"]["credentials"] = ["RLAUNCH_TEST_NEVER_SET_TOKEN"]
    data["gates"].pop("skip_smoke_gate", None)
    data["gates"]["smoke"] = {"identity": SMOKE, "output_path": "/s"}
    return PlannedLaunch.of(schema.from_dict(data))


def _attempt(digest: str, state: str = "succeeded") -> dict[str, Any]:
    return {"attempt_id": f"{state}-{digest[:4]}", "state": state, "runtime_digest": digest}


def test_the_smokes_runtime_is_its_latest_attempts_not_its_first(launch: PlannedLaunch) -> None:
    ours = launch.document.runtime.source_digest
    rerun = SmokeEvidence(SMOKE, (_attempt(OTHER), _attempt(ours)), launch.document)  # rerun on this runtime
    assert smoke_problems(launch, rerun) == []
    stale = SmokeEvidence(SMOKE, (_attempt(ours), _attempt(OTHER)), launch.document)  # latest on another one
    assert smoke_problems(launch, stale) == [
        f"the declared smoke {SMOKE} ran under runtime source digest {OTHER[:16]}, not this runtime's "
        f"{ours[:16]}: rerun the smoke on this runtime"
    ]


def test_the_plans_smoke_row_reads_the_latest_attempt_too(launch: PlannedLaunch) -> None:
    ours = launch.document.runtime.source_digest
    assert smoke_record_problem([_attempt(ours, "failed"), _attempt(ours)], SMOKE, ours) is None
    assert smoke_record_problem([_attempt(ours), _attempt(ours, "failed")], SMOKE, ours) == (
        f"the declared smoke {SMOKE}'s latest attempt failed-{ours[:4]} is failed"
    )
    assert smoke_record_problem([_attempt(OTHER), _attempt(ours)], SMOKE, ours) is None
    assert smoke_record_problem([_attempt(ours), _attempt(OTHER)], SMOKE, ours) == (
        f"the declared smoke {SMOKE} ran under runtime source digest {OTHER[:16]}, not this runtime's "
        f"{ours[:16]}: rerun the smoke on this runtime"
    )


def test_a_served_version_is_not_judged_whatever_the_evidence_says(launch: PlannedLaunch) -> None:
    """Every gate would speak for this launch (another runtime, a failed attempt, a smoke that has not
    run, a large launch under `dev`, a missing credential); served, it launches nothing."""
    evidence = Evidence(attempts=(_attempt(OTHER, "failed"),), smoke=SmokeEvidence(SMOKE))
    launched = judge(launch, evidence, Authorisations(default_stage="rl (choose it with --stage rl|eval)"))
    assert [f.gate for f in launched] == ["version", "retry", "smoke", "stage", "credentials", "calendar version"]
    served = Evidence(attempts=evidence.attempts, served=True, smoke=evidence.smoke)
    assert judge(launch, served, Authorisations(default_stage="rl (choose it with --stage rl|eval)")) == ()
