"""`rlaunch fit`: what fits on N x GPU for a model, from the same memory model as the plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from experiments import rl_plan_example as example
from rlaunch.cli.admin import main as rlaunch_main
from rlaunch.skyrl import ModelFacts, SkyRLRolePlan, SkyRLTopology, check_plan
from tests.rules.test_fit import applied

QWEN3_8B = ModelFacts.from_hf_config(example.QWEN3_8B_CONFIG)
# The explicit settings the preflight wants of any recipe, beside the command's default token budget.
REVIEWED = {
    "trainer": {
        "max_prompt_length": 1024,
        "ckpt_interval": 20,
        "hf_save_interval": -1,
        "resume_mode": "latest",
        "logger": "console",
    },
    "generator": {"sampling_params": {"max_generate_length": 3072}},
}


@pytest.fixture
def config(tmp_path: Path) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(example.QWEN3_8B_CONFIG), encoding="utf-8")
    return str(path)


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(rlaunch_main, ["fit", *args])
    return result.exit_code, result.output


def test_a_plan_that_fits_says_so_with_its_table(config: str) -> None:
    code, out = run("--model", config, "--gpu", "H100", "--gpus", "8")
    assert code == 0, out
    assert "on 1 node(s) x 8 H100, every role colocated, 8 engine(s) x TP1" in out
    assert "per device: H100" in out and out.rstrip().endswith("fits: every row is ok")


def test_a_plan_that_does_not_fit_prints_nearest_plans_and_each_passes_the_preflight(config: str) -> None:
    code, out = run("--model", config, "--gpu", "L4", "--gpus", "4")
    assert code == 1, out
    assert "does not fit as asked (REFUSED)." in out
    shown = out.split("paste the changes into the spec):\n", 1)[1].strip().splitlines()
    assert shown and all(": " in line for line in shown)
    asked = SkyRLTopology(
        num_nodes=1,
        gpus_per_node=4,
        gpu_variant="L4",
        role_plan=SkyRLRolePlan(
            colocate_all=True,
            policy_num_nodes=1,
            policy_num_gpus_per_node=4,
            num_inference_engines=4,
            inference_engine_tensor_parallel_size=1,
            inference_engine_pipeline_parallel_size=1,
            inference_engine_data_parallel_size=1,
            inference_engine_expert_parallel_size=1,
            train_batch_size=256,
            policy_mini_batch_size=64,
            micro_train_batch_size_per_gpu=2,
            n_samples_per_prompt=8,
        ),  # fmt: skip
    )
    assert any(v.code == "memory.model_states" for v in check_plan(asked, REVIEWED, "fsdp", model=QWEN3_8B))
    for line in shown:
        changes = line.strip().split(": ", 1)[1].split(" (tightest", 1)[0].split(", ")
        assert check_plan(*applied(asked, REVIEWED, changes), "fsdp", model=QWEN3_8B) == [], line


def test_the_recipe_decides_the_token_budget(config: str, tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "generator:\n  sampling_params: {max_generate_length: 31744}\ntrainer: {max_prompt_length: 1024}\n"
    )
    code, out = run("--model", config, "--gpu", "L4", "--gpus", "8", "--recipe", str(recipe))
    assert code == 1 and "one 32768-token" not in out and "32768 tokens x 147456 B" in out, out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--gpus", "8", "--engine-tp", "3"), "--engine-tp 3 must divide the 8 GPUs"),
        (("--gpus", "0"), "--gpus"),
    ],
)
def test_bad_input_names_the_option(config: str, args: tuple[str, ...], message: str) -> None:
    code, out = run("--model", config, "--gpu", "H100", *args)
    assert code != 0 and message in out, out


def test_a_config_it_cannot_read_or_size_is_a_clear_error(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.json")
    code, out = run("--model", missing, "--gpu", "H100", "--gpus", "8")
    assert code != 0 and f"--model {missing}: cannot read a config.json" in out
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({"model_type": "no-such-architecture"}))
    code, out = run("--model", str(odd), "--gpu", "H100", "--gpus", "8")
    assert code != 0 and f"--model {odd}: cannot size this model" in out, out


def test_a_critic_adds_its_rows(config: str) -> None:
    code, out = run("--model", config, "--gpu", "H100", "--gpus", "8", "--critic")
    assert code == 0 and "micro batch 2, a critic:" in out, out
    assert "  critic     model states" in out and "  critic     training step" in out
    code, out = run("--model", config, "--gpu", "H100", "--gpus", "8")
    assert "critic" not in out
