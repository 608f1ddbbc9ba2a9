"""The trl-cpu runtime's supervised fine-tuning (`rlaunch_trl_cpu.sft`, the CPU twin of SkyRL's SFT),
run in the real runtime on the conversations `rlaunch.training` writes."""

from __future__ import annotations

import json

import pytest

from rlaunch.training.warm_start import conversations

from .helpers import run_group, run_module


@pytest.fixture(scope="module")
def chats(tiny_assets, tmp_path_factory) -> str:
    rows = conversations(tiny_assets["data"].read_text(), "reward_spec.ground_truth", "train.jsonl")
    path = tmp_path_factory.mktemp("chats") / "train.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def sft(env, assets, chats: str, out, *extra: str, seed: int = 0) -> dict:
    args = ["--model", str(assets["model"]), "--data", chats, "--out", str(out), "--steps", "30", "--seed", str(seed)]
    return run_module(env, "rlaunch_trl_cpu.sft", [*args, "--batch-size", "8", *extra])


def test_the_warm_start_learns_the_answers_and_is_the_same_for_a_seed(trl_env, tiny_assets, chats, tmp_path) -> None:
    env, _ = trl_env
    first = sft(env, tiny_assets, chats, tmp_path / "a")
    assert first["steps"] == 30 and first["examples"] == 32 and len(first["losses"]) == 30
    assert first["last_loss"] < first["first_loss"] / 2, first
    assert first["files"]["model.safetensors"] != tiny_assets["model_info"]["files"]["model.safetensors"]
    assert {"config.json", "generation_config.json", "tokenizer.json"} <= set(first["files"])
    again = sft(env, tiny_assets, chats, tmp_path / "b")
    assert again["files"] == first["files"]
    other = sft(env, tiny_assets, chats, tmp_path / "c", seed=1)
    assert other["files"]["model.safetensors"] != first["files"]["model.safetensors"]
    # micro batches weighted by their share of the batch's response tokens: the same step, to rounding
    micro = sft(env, tiny_assets, chats, tmp_path / "d", "--micro-batch", "3", "--steps", "1")  # the last --steps wins
    assert micro["micro_batch"] == 3
    assert micro["first_loss"] == pytest.approx(first["first_loss"], rel=1e-5)


def test_a_max_length_that_leaves_no_response_token_is_refused(trl_env, tiny_assets, chats, tmp_path) -> None:
    env, _ = trl_env
    args = ["--model", str(tiny_assets["model"]), "--data", chats, "--out", str(tmp_path / "m"), "--steps", "1"]
    done = run_group(
        env.command("rlaunch_trl_cpu.sft", [*args, "--max-length", "4"]), env=env.process_env(inherit=True), timeout=300
    )
    assert done.returncode == 2 and "--max-length 4" in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "m").exists()


def test_the_warm_start_refuses_missing_data_naming_it(trl_env, tiny_assets, tmp_path) -> None:
    env, _ = trl_env
    missing = tmp_path / "nope.jsonl"
    args = ["--model", str(tiny_assets["model"]), "--data", str(missing), "--out", str(tmp_path / "m"), "--steps", "1"]
    done = run_group(env.command("rlaunch_trl_cpu.sft", args), env=env.process_env(inherit=True), timeout=300)
    assert done.returncode == 2 and str(missing) in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "m").exists()
