"""The trl-cpu runtime's supervised warm start (`rlaunch_trl_cpu.sft`), run in the real runtime."""

from __future__ import annotations

from .helpers import run_group, run_module


def sft(env, assets, out, seed: int = 0) -> dict:
    args = ["--model", str(assets["model"]), "--data", str(assets["data"]), "--out", str(out)]
    return run_module(env, "rlaunch_trl_cpu.sft", [*args, "--steps", "30", "--seed", str(seed), "--batch-size", "8"])


def test_the_warm_start_learns_the_answers_and_is_the_same_for_a_seed(trl_env, tiny_assets, tmp_path) -> None:
    env, _ = trl_env
    first = sft(env, tiny_assets, tmp_path / "a")
    assert first["steps"] == 30 and first["examples"] == 32
    assert first["last_loss"] < first["first_loss"] / 2, first
    assert first["files"]["model.safetensors"] != tiny_assets["model_info"]["files"]["model.safetensors"]
    assert {"config.json", "generation_config.json", "tokenizer.json"} <= set(first["files"])
    again = sft(env, tiny_assets, tmp_path / "b")
    assert again["files"] == first["files"]
    other = sft(env, tiny_assets, tmp_path / "c", seed=1)
    assert other["files"]["model.safetensors"] != first["files"]["model.safetensors"]


def test_the_warm_start_refuses_missing_data_naming_it(trl_env, tiny_assets, tmp_path) -> None:
    env, _ = trl_env
    missing = tmp_path / "nope.jsonl"
    args = ["--model", str(tiny_assets["model"]), "--data", str(missing), "--out", str(tmp_path / "m"), "--steps", "1"]
    done = run_group(env.command("rlaunch_trl_cpu.sft", args), env=env.process_env(inherit=True), timeout=300)
    assert done.returncode == 2 and str(missing) in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "m").exists()
