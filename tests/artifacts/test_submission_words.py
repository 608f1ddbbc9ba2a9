"""The submission path's refusal in process: which planned actions of a step only its coordinator
may launch are refused (run and rebuild, never a served one), every such step named, and a step's
version refused naming the step. tests/submission/test_submission_path.py goes through the CLI.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from rlaunch.artifacts import InvalidIdentityError
from rlaunch.artifacts.plan import PlannedStep, SubmissionPathError, refuse_foreign_steps
from tests.artifacts.helpers import make_step

COORDINATOR = "@rl_build_options"


def planned(identity: str, action: str, submitted_by: str | None = COORDINATOR) -> PlannedStep:
    step: Any = SimpleNamespace(identity=identity, submitted_by=submitted_by)
    return PlannedStep(step, action, f"/p/{identity}")  # type: ignore[arg-type]


def test_a_step_to_run_or_rebuild_is_refused_naming_each_and_the_path_that_may() -> None:
    steps = [planned("rl@1", "run"), planned("rl@2", "rebuild"), planned("rl@3", "serve"), planned("d@1", "run", None)]
    with pytest.raises(SubmissionPathError) as refused:
        refuse_foreign_steps(steps, "@build_options")
    assert str(refused.value) == (
        f"this runner cannot build rl@1 (launched only by {COORDINATOR}), rl@2 (launched only by {COORDINATOR}): "
        f"decorate the experiment's main with {COORDINATOR} instead, so the step goes through its coordinator, "
        "submission checks and gates"
    )
    refuse_foreign_steps(steps, COORDINATOR)  # its own path builds it
    refuse_foreign_steps([planned("rl@3", "serve"), planned("rl@4", "unneeded")], None)


def test_a_malformed_version_names_the_step() -> None:
    with pytest.raises(InvalidIdentityError) as refused:
        make_step("data", "not a version")
    assert str(refused.value).startswith("version of data=")
