"""Checks that need this environment or storage, run right before a coordinator is submitted."""

from __future__ import annotations

import os

from rlaunch import storage
from rlaunch.launch_config.composition import get_path
from rlaunch.runs.layout import temporary_base
from rlaunch.skyrl.launch_document import live_run_paths
from rlaunch.skyrl.plan_view import resume_refusal
from rlaunch.skyrl.spec import SkyRLSpec


def submission_problems(spec: SkyRLSpec, prefix: str) -> list[str]:
    """Reasons `--run` must not submit `spec` (empty when it may)."""
    problems = []
    paths = live_run_paths(spec, prefix)
    for root in dict.fromkeys((prefix, temporary_base(prefix))):
        problem = storage.writable_problem(root)
        if problem:
            problems.append(f"{spec.name}@{spec.version}: {problem} (outputs go to {paths.output_path})")
    refusal = resume_refusal(spec, prefix)
    if refusal:
        problems.append(f"{spec.name}@{spec.version}: {refusal}")
    if get_path(spec.composed_recipe, "trainer.logger") == "wandb" and not os.environ.get("WANDB_API_KEY"):
        problems.append(
            f"{spec.name}@{spec.version}: trainer.logger is wandb but WANDB_API_KEY is not set here, so it cannot be forwarded"
        )
    return problems
