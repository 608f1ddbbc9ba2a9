"""`rl_build_options`: what an RL main must build, and the plan it prints before anything runs."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
from typing import Any

import click
import pytest
from click.testing import CliRunner

from rlaunch.artifacts import ArtifactStep
from rlaunch.cli import rl_build_options
from rlaunch.skyrl import LocalSkyRLExecution, skyrl_step
from tests.support.polling import run_python
from tests.support.specs import DAY, data_step, iris, spec

REPO = pathlib.Path(__file__).resolve().parents[2]


def rl(execution: Any = None, name: str = "checkpoints/gsm8k-grpo") -> ArtifactStep[Any]:
    return skyrl_step(spec(name=name), execution or iris(), export_hf=True)


@click.command()
@click.option(
    "--shape", type=click.Choice(["rl", "no-rl", "two-routes", "two-priorities", "two-same-route"]), default="rl"
)
@rl_build_options
def experiment(shape: str) -> Any:
    if shape == "no-rl":
        return data_step()
    if shape == "two-routes":
        return [rl(iris()), rl(LocalSkyRLExecution(), name="checkpoints/other")]
    if shape == "two-priorities":
        return [rl(iris(priority="interactive")), rl(iris(priority="batch"), name="checkpoints/other")]
    if shape == "two-same-route":
        return [rl(iris(cpu=8)), rl(iris(cpu=16), name="checkpoints/other")]
    return rl()


def invoke(*args: str):
    return CliRunner().invoke(experiment, ["--version", DAY, *args])


def test_a_main_that_builds_no_skyrl_step_is_an_error() -> None:
    result = invoke("--shape", "no-rl")
    assert result.exit_code != 0
    assert "did not construct a SkyRL artifact step" in result.output
    assert "skyrl_step(" in result.output


@pytest.mark.parametrize(
    ("shape", "error"),
    [("two-routes", "multiple cluster routes"), ("two-priorities", "multiple coordinator priorities")],
    ids=["cluster-routes", "priorities"],
)
def test_multiple_cluster_routes_or_priorities_are_an_error(shape: str, error: str) -> None:
    result = invoke("--shape", shape)
    assert result.exit_code != 0
    assert error in result.output


def test_steps_on_one_route_with_other_host_sizes_are_fine() -> None:
    assert invoke("--shape", "two-same-route").exit_code == 0


def test_plan_prints_the_rl_details_before_the_step_table(prefix: str) -> None:
    result = invoke()
    assert result.exit_code == 0, result.output
    text = result.output
    details, table = text.split("Plan (", 1)
    assert "checkpoints/gsm8k-grpo@2026.11.30" in table
    from rlaunch.runtimes.registry import get_profile

    digest = get_profile("fsdp").source_digest
    packages = len(get_profile("fsdp").lock_requirements())
    expected = [
        f"runtime            fsdp  source digest {digest} (lock: {packages} packages)",
        "entrypoint         standard -> ",
        "allocation         8 node(s) x 8 H100; per node 96 CPU, 1600GB memory, 4TB disk; backend iris",
        "role geometry      disaggregated; policy 4 x 8; rollout 4 engine(s) x TP1 x PP1 x DP8 (EP1)",
        "batch sizes        train 256 prompts, mini 64, micro 2/device, 8 samples/prompt",
        "token budget       prompt 1024 + response 3072 tokens",
        f"model              models/qwen3-8b@{DAY} (no source revision (built by this graph); tokenizer revision ",
        f"train data         data/gsm8k@{DAY}/train.parquet",
        f"validation data    data/gsm8k@{DAY}/test.parquet",
        f"outputs            {prefix}/checkpoints/gsm8k-grpo/{DAY}",
        f"checkpoints        {prefix}/.tmp/ttl=14d/checkpoints/gsm8k-grpo/{DAY}/checkpoints (keep 2, every 20 steps, resume_mode latest)",
        f"exports            {prefix}/checkpoints/gsm8k-grpo/{DAY}/exports (export_hf=True)",
        f"terminal manifest  {prefix}/checkpoints/gsm8k-grpo/{DAY}/terminal.json",
        "GPUs by role        policy 32, rollout 32 (dedicated), reference shared with policy",
        "policy dp           32",
        "per-device mini     16 sequences; micro 2 -> 8 gradient-accumulation step(s)",
        "per training step   256 prompts, 2048 samples, 4 optimizer step(s)",
    ]
    for line in expected:
        assert line in details, f"{line!r} missing from:\n{details}"
    assert details.index("runtime ") < details.index("derived:")


def test_plan_json_carries_the_details() -> None:
    result = invoke("--plan-format", "json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    detail = payload["details"][f"checkpoints/gsm8k-grpo@{DAY}"]
    joined = "\n".join(detail)
    for fragment in (
        "source digest",
        "role geometry",
        "policy dp           32",
        "gradient-accumulation",
        "2048 samples",
    ):
        assert fragment in joined
    rl_row = next(s for s in payload["steps"] if s["name"] == "checkpoints/gsm8k-grpo")
    assert rl_row["deps"] == [f"models/qwen3-8b@{DAY}", f"data/gsm8k@{DAY}"]


def test_preflight_failure_fails_the_plan_listing_every_violation() -> None:
    @click.command()
    @rl_build_options
    def broken() -> Any:
        from tests.support.specs import seed_topology

        return skyrl_step(
            spec(topo=seed_topology(inference_engine_data_parallel_size=1, micro_train_batch_size_per_gpu=3)), iris()
        )

    result = CliRunner().invoke(broken, ["--version", DAY])
    assert result.exit_code != 0
    assert "[topology.gpu_budget]" in result.output and "[batch.per_gpu_mini_micro]" in result.output


# --- the example module, as a user runs it --------------------------------------------------------


def run_example(tmp_path: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLAUNCH_", "WANDB_"))}
    env["RLAUNCH_PREFIX"] = str(tmp_path / "prefix")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "src")])
    return run_python(["-m", "experiments.rl_plan_example", "--version", DAY, *args], tmp_path, env)


@pytest.mark.parametrize("stage", ["rl", "evaluation"])
def test_example_prints_the_plan(tmp_path: pathlib.Path, stage: str) -> None:
    done = run_example(tmp_path, "--stage", stage)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("source digest") < out.index("Plan (")
    assert "policy dp           32" in out
    assert "rollout 4 engine(s) x TP1 x PP1 x DP8" in out
    assert ("evals/gsm8k-grpo-qwen3-8b/gsm8k-test@" in out) is (stage == "evaluation")
    assert f"Plan ({5 if stage == 'evaluation' else 4} steps" in out
    assert not (tmp_path / "prefix").exists() or not any((tmp_path / "prefix").rglob(".artifact.json"))  # nothing ran


def test_the_gpu_smoke_goes_without_a_skip_and_the_stage_is_chosen(tmp_path: pathlib.Path) -> None:
    unchosen = run_example(tmp_path)
    assert unchosen.returncode == 2 and "Missing option '--stage'" in unchosen.stderr
    plan = run_example(tmp_path, "--stage", "smoke")
    assert plan.returncode == 0, plan.stderr
    smoke = "checkpoints/gsm8k-grpo-qwen3-8b-smoke@2026.11.30"
    lines = plan.stdout.splitlines()
    start = lines.index(f"judgement of {smoke} (--run and the launch host refuse on the same findings):")
    judged = lines[start + 1 : lines.index("  --run would submit nothing", start)]
    refused = [line.removeprefix("  refused: ") for line in judged if line.startswith("  refused: ")]
    assert any(line.startswith("  waived: large: it is declared a smoke (is_smoke=True)") for line in judged), judged
    run = run_example(tmp_path, "--stage", "smoke", "--run")  # refused here only for what this machine lacks
    assert "Nothing was submitted." in run.stderr
    errors = [line.removeprefix(f"error: {smoke}: ") for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert errors == refused, (errors, refused)  # what --run refuses, the dry run said first, in its words
    assert not any(e.startswith(("smoke: ", "calendar version: ")) for e in errors), errors
    assert "--skip-smoke-gate" not in run.stderr


def test_example_prints_the_per_gpu_memory_table(tmp_path: pathlib.Path) -> None:
    done = run_example(tmp_path, "--stage", "rl")
    assert done.returncode == 0, done.stderr
    table = done.stdout[done.stdout.index("memory per device") : done.stdout.index("readiness:")]
    assert "per device: H100, 79.22 GiB" in table
    assert "estimate  capacity  headroom  status" in table
    for role, phase in (
        ("policy", "model states"),
        ("policy", "training step"),
        ("reference", "forward"),
        ("rollout", "engine weights"),
        ("rollout", "KV of one sequence"),
        ("rollout", "generation"),
    ):
        assert f"{role:<10} {phase:<19}" in table, (role, phase)
    statuses = re.findall(r"  (ok|tight|over \(estimate\)|REFUSED)$", table, re.MULTILINE)
    assert statuses == ["ok"] * 6
    assert "[ok]      memory fit      every role fits" in done.stdout


@pytest.mark.parametrize(
    ("variant", "code", "fragments"),
    [
        (
            "one-node-24gb",
            "memory.model_states",
            ("at least 22.88 GiB per device", "one L4 has 22.49 GiB", "cpu_offload=true"),
        ),
        (
            "long-generation-24gb",
            "memory.kv_one_sequence",
            ("one 32768-token sequence needs 4.5 GiB", "at most 2.74 GiB", "at most 19936 tokens"),
        ),
    ],
)
def test_example_variants_that_cannot_fit_are_refused_with_numbers_and_fix(
    tmp_path: pathlib.Path, variant: str, code: str, fragments: tuple[str, ...]
) -> None:
    done = run_example(tmp_path, "--stage", "rl", "--variant", variant)
    assert done.returncode != 0
    assert f"[{code}]" in done.stderr and "Fix:" in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in done.stderr, (fragment, done.stderr)
    assert "Nearest plans that fit: (1) " in done.stderr, (
        done.stderr
    )  # each passes the preflight: tests/rules/test_fit.py
    assert "Plan (" not in done.stdout


def test_example_broken_lists_every_violation(tmp_path: pathlib.Path) -> None:
    done = run_example(tmp_path, "--stage", "rl", "--broken")
    assert done.returncode != 0
    for code in (
        "topology.gpu_budget",
        "batch.train_mini",
        "batch.per_gpu_mini_micro",
        "batch.per_gpu_train_mini",
        "batch.tail_stride",
    ):
        assert f"[{code}]" in done.stderr, done.stderr
    assert "describes 36 GPUs" in done.stderr
    assert "Plan (" not in done.stdout


def test_example_plan_json(tmp_path: pathlib.Path) -> None:
    done = run_example(tmp_path, "--stage", "rl", "--plan-format", "json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    (identity,) = [k for k in payload["details"] if k.startswith("checkpoints/gsm8k-grpo-qwen3-8b@")]
    text = "\n".join(payload["details"][identity])
    assert "source digest" in text and "per training step   256 prompts, 2048 samples" in text
    memory = payload["facts"][identity]["memory"]  # the memory table as data, beside its printed lines
    assert memory["device"] == {"name": "H100", "capacity_gib": 79.22} and memory["unsized"] == []
    rows = {(r["role"], r["phase"]): r for r in memory["rows"]}
    assert rows["policy", "model states"]["status"] == "ok" and rows["policy", "model states"]["estimate_gib"] == 3.81
    assert memory["kv_cache"]["max_model_len"] == 4096 and memory["kv_cache"]["tokens"] > 300_000
    assert payload["facts"][identity]["what_would_fit"] == []  # every row ok: nothing searched


@pytest.mark.parametrize("slots", ["1", "2"])
def test_cpu_smoke_plans_without_running(tmp_path: pathlib.Path, slots: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLAUNCH_", "WANDB_"))}
    env["RLAUNCH_PREFIX"] = str(tmp_path / "prefix")
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "src")])
    done = run_python(["-m", "experiments.smoke", "--version", DAY, "--stage", "rl", "--slots", slots], tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert "runtime            trl-cpu  source digest " in done.stdout
    assert f"allocation         1 node(s) x {slots} CPU slot" in done.stdout
    assert f"policy dp           {slots}" in done.stdout
