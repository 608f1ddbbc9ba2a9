"""The plan of step jobs: each step's placement, the GPU-hours of a terminal stage, and the
preflight of a step job's placement (node width, runtime present) before anything is allocated."""

from __future__ import annotations

import dataclasses
import json
import pathlib

import pytest

from experiments import rl_plan_example as example
from rlaunch.artifacts import ArtifactStep
from rlaunch.artifacts.plan import plan_graph
from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.cli.plan_text import stage_gpu_hours
from rlaunch.cli.step_checks import StepJobPlacementError, preflight_step_jobs, step_job_problems
from rlaunch.step_jobs import StepExecution
from tests.skyrl.test_plan_golden import dry_run

VERSION = "2026.11.30"


def evaluation_with(execution: StepExecution) -> ArtifactStep:
    with build_context(BuildContext(VersionCodex(VERSION, {}))):
        step = example.evaluation(example.rl_step(False))
    return dataclasses.replace(step, execution=execution)


def test_the_evaluation_stage_dry_run_shows_its_placement_and_gpu_hours(tmp_path: pathlib.Path) -> None:
    evaluation = dry_run(tmp_path / "prefix", "--stage", "evaluation")
    assert evaluation.returncode == 0, evaluation.stderr
    out = evaluation.stdout
    assert (
        f"evals/gsm8k-grpo-qwen3-8b/gsm8k-test@{VERSION}  step job: 1 node(s) x (8 x H100, 96 CPU, 1600GB memory, "
        "4TB disk), runtime fsdp, limit 7200s  (16 GPU-hours at most)"
    ) in out
    assert f"data/gsm8k@{VERSION}" in out
    assert "step job: 1 node(s) x (no accelerator, 16 CPU, 64GB memory, 200GB disk), runtime fsdp" in out
    # 8 nodes x 8 H100 for the RL step's 36 h limit, plus the evaluation's 8 H100 for 2 h
    assert f"Stage evals/gsm8k-grpo-qwen3-8b/gsm8k-test@{VERSION}: 2320 GPU-hours at most" in out
    rl = dry_run(tmp_path / "prefix", "--stage", "rl")
    assert f"Stage checkpoints/gsm8k-grpo-qwen3-8b@{VERSION}: 2304 GPU-hours at most" in rl.stdout
    assert not (tmp_path / "prefix").exists(), "a dry run writes nothing"


def test_the_json_plan_carries_each_steps_and_each_stages_gpu_hours(tmp_path: pathlib.Path) -> None:
    done = dry_run(tmp_path / "prefix", "--stage", "evaluation", "--plan-format", "json")
    hours = json.loads(done.stdout)["gpu_hours"]
    assert hours["steps"][f"evals/gsm8k-grpo-qwen3-8b/gsm8k-test@{VERSION}"] == 16.0
    assert hours["stages"] == {f"evals/gsm8k-grpo-qwen3-8b/gsm8k-test@{VERSION}": 2320.0}


def test_a_served_step_costs_nothing(tmp_path: pathlib.Path) -> None:
    step = evaluation_with(example.EVALUATION)
    planned = [dataclasses.replace(p, action="serve") if p.step is step.deps[0] else p
               for p in plan_graph([step], str(tmp_path))]  # fmt: skip
    assert stage_gpu_hours(planned, step) == 16.0


def test_a_step_job_wider_than_a_node_is_refused_before_anything_is_allocated() -> None:
    wide = evaluation_with(dataclasses.replace(example.EVALUATION, accelerators=16))
    with pytest.raises(StepJobPlacementError) as refused:
        preflight_step_jobs([wide])
    assert "StepExecution.accelerators=16 x H100 per node, but a node holds 8" in str(refused.value)
    assert step_job_problems([evaluation_with(example.EVALUATION)]) == []  # 8 per node: the node's width


def test_a_step_job_runtime_must_exist_and_run_on_the_devices_it_asks_for() -> None:
    missing = evaluation_with(dataclasses.replace(example.EVALUATION, runtime="no-such-runtime"))
    (problem,) = step_job_problems([missing])
    assert "StepExecution.runtime='no-such-runtime'" in problem and "not registered" in problem
    cpu = evaluation_with(dataclasses.replace(example.EVALUATION, runtime="trl-cpu"))
    (problem,) = step_job_problems([cpu])
    assert "runtime 'trl-cpu' runs on CPU" in problem
