"""Checks that need this environment or storage, run right before a coordinator is submitted.

They read the launch document the step would launch and its stored facts (`planning`)."""

from __future__ import annotations

import os

from rlaunch import storage
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.composition import get_path
from rlaunch.runs.layout import temporary_base
from rlaunch.skyrl.plan.stored_facts import StoredFacts
from rlaunch.skyrl.views.resume_check import resume_refusal


def submission_problems(planned: PlannedLaunch, facts: StoredFacts, prefix: str) -> list[str]:
    """Reasons `--run` must not submit the `planned` run under `prefix` (empty when it may)."""
    document = planned.document
    who, problems = document.run.artifact, []
    for root in dict.fromkeys((prefix, temporary_base(prefix))):
        problem = storage.writable_problem(root)
        if problem:
            problems.append(f"{who}: {problem} (outputs go to {document.artifacts.output_path})")
    refusal = resume_refusal(planned, facts)
    if refusal:
        problems.append(f"{who}: {refusal}")
    if get_path(planned.composed, "trainer.logger") == "wandb" and not os.environ.get("WANDB_API_KEY"):
        problems.append(f"{who}: trainer.logger is wandb but WANDB_API_KEY is not set here, so it cannot be forwarded")
    return problems
