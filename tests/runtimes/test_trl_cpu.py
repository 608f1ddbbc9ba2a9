"""Real trl-cpu runs: TRL GRPO on CPU in the environment built from the profile's lock."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from .helpers import explain, metrics, run_entry, run_module, run_small_recipe, small_recipe, write_final


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def full_run(trl_env, tiny_assets, tmp_path_factory):
    """An uninterrupted 4-step run; checkpoints and records on `file://` URLs (the fsspec path)."""
    env, _ = trl_env
    root = tmp_path_factory.mktemp("full-run")
    recipe = small_recipe(
        tiny_assets,
        root,
        trainer__ckpt_interval=1,
        trainer__ckpt_path=f"file://{root / 'ckpts'}",
        data__val_data=[str(tiny_assets["val"])],
        trainer__eval_interval=2,
        trainer__eval_before_train=True,
        trainer__eval_batch_size=8,
    )
    final = write_final(root / "FINAL.yaml", recipe)
    result = run_entry(env, final, attempt=f"file://{root / 'attempt'}", task_dir=root / "task")
    assert result.returncode == 0, explain(result)
    return {"root": root, "final": final, "recipe": recipe, "result": result}


def test_tiny_assets_describe_what_they_wrote(trl_env, tiny_assets, tmp_path):
    env, _ = trl_env
    info = tiny_assets["model_info"]
    for key in ("num_attention_heads", "num_key_value_heads", "max_position_embeddings", "num_parameters", "files"):
        assert key in info
    assert info["architecture"] == "Qwen3ForCausalLM"
    model_dir = tiny_assets["model"]
    assert info["files"]["model.safetensors"] == _sha(model_dir / "model.safetensors")
    assert (model_dir / "tokenizer.json").exists()
    tok = tiny_assets["tokenizer_info"]
    assert tok["vocab_size"] == 512
    assert set(tok["special_tokens"]) == {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}
    # deterministic for a seed
    again = run_module(env, "rlaunch_trl_cpu.tiny", ["tokenizer", "--out", str(tmp_path / "tok"), "--seed", "3"])
    assert again["files"] == tok["files"]


def test_run_writes_records_checkpoints_and_export(full_run, trl_env, tiny_assets):
    env, _ = trl_env
    root = full_run["root"]
    attempt = root / "attempt"

    joined = json.loads((attempt / "joined" / "trainer-rank-0.json").read_text())
    assert joined["rank"] == 0 and joined["world_size"] == 1 and joined["pid"] > 0 and joined["host"]

    load = json.loads((attempt / "model_load.json").read_text())
    assert load["configured_path"] == str(tiny_assets["model"])
    assert load["loaded_path"] == str(Path(tiny_assets["model"]).resolve())
    assert load["weights_sha256"] == _sha(tiny_assets["model"] / "model.safetensors")
    assert load["config_sha256"] == _sha(tiny_assets["model"] / "config.json")
    assert load["identity"] == "test/tiny-model@2026.11.30:abc123"
    assert load["architecture"] == "Qwen3ForCausalLM"
    assert load["num_parameters"] == tiny_assets["model_info"]["num_parameters"]

    lines = metrics(attempt)
    assert [m["step"] for m in lines] == [1, 2, 3, 4]
    for m in lines:
        for key in ("loss", "reward_mean", "reward_std", "learning_rate", "time"):
            assert isinstance(m[key], float), (key, m)
        assert m["kl"] is not None  # use_kl_loss defaults to true
    assert lines[0]["time"] <= lines[-1]["time"]

    # data.val_data: evaluated before training and every eval_interval (2) training steps
    evals = [json.loads(x) for x in (attempt / "eval.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evals] == [0, 2, 4]
    assert all(e["n"] == 8 and 0.0 <= e["reward_mean"] <= 1.0 for e in evals)
    assert [("eval_reward_mean" in m) for m in lines] == [False, True, False, True]

    ckpts = root / "ckpts"
    assert (ckpts / "latest").read_text().strip() == "4"
    kept = sorted(p.name for p in ckpts.iterdir() if p.name.startswith("global_step_"))
    assert kept == ["global_step_3", "global_step_4"]  # ckpt_interval 1, max_ckpts_to_keep 2
    step4 = ckpts / "global_step_4"
    for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json", "tokenizer.json"):
        assert (step4 / name).exists(), name
    assert any(p.name.startswith("rng_state") for p in step4.iterdir())
    info = json.loads((step4 / "rlaunch_checkpoint.json").read_text())
    assert info["global_step"] == 4 and info["runtime_digest"] == env.digest and info["written_at"] > 0
    assert json.loads((step4 / "trainer_state.json").read_text())["global_step"] == 4

    policy = root / "exports" / "global_step_4" / "policy"
    for name in (
        "config.json",
        "model.safetensors",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ):
        assert (policy / name).exists(), name
    assert _sha(policy / "model.safetensors") != _sha(tiny_assets["model"] / "model.safetensors"), "weights must change"


def test_export_reloads_and_generates(full_run, trl_env, tiny_assets):
    env, _ = trl_env
    policy = full_run["root"] / "exports" / "global_step_4" / "policy"
    out = run_module(
        env,
        "rlaunch_trl_cpu.evaluate",
        [
            "--model", str(policy),
            "--data", str(tiny_assets["data"]),
            "--env-class", "arithmetic",
            "--max-new-tokens", "6",
            "--seed", "0",
            "--limit", "4",
            "--temperature", "1.0",
            "--samples", "2",
        ],
    )  # fmt: skip
    assert out["n"] == 8 and out["prompts"] == out["n_prompts"] == 4 and out["samples"] == 2
    assert len(out["per_prompt"]) == 4 and out["scorer"] == "arithmetic" and out["sampling"]["temperature"] == 1.0
    low, high = out["accuracy_interval"]
    assert 0.0 <= low <= out["accuracy"] <= high <= 1.0
    assert 0.0 <= out["reward_mean"] <= 1.0 and out["reward_std"] >= 0.0
    assert out["weights_sha256"] == _sha(policy / "model.safetensors")
    assert isinstance(out["example"]["completion"], str)


def test_resume_continues_to_the_same_final_step(full_run, trl_env, tiny_assets, tmp_path):
    env, _ = trl_env
    result = run_small_recipe(env, tiny_assets, tmp_path, {"trainer.max_training_steps": 2}, "att1")
    assert result.returncode == 0, explain(result)
    assert [m["step"] for m in metrics(tmp_path / "att1")] == [1, 2]
    assert (tmp_path / "ckpts" / "latest").read_text().strip() == "2"

    result = run_small_recipe(env, tiny_assets, tmp_path, {}, "att2")  # max_training_steps 4, resume_mode latest
    assert result.returncode == 0, explain(result)
    resumed = metrics(tmp_path / "att2")
    assert [m["step"] for m in resumed] == [3, 4]
    assert (tmp_path / "ckpts" / "latest").read_text().strip() == "4"
    assert (tmp_path / "exports" / "global_step_4" / "policy" / "config.json").exists()
    assert json.loads((tmp_path / "att2" / "model_load.json").read_text())["resumed_from_step"] == 2
    # the same trajectory as the uninterrupted run (same seed, data, optimizer and RNG state)
    uninterrupted = {m["step"]: m for m in metrics(full_run["root"] / "attempt")}
    for m in resumed:
        assert m["reward_mean"] == pytest.approx(uninterrupted[m["step"]]["reward_mean"], rel=1e-3, abs=1e-6)


def test_resume_at_final_step_trains_nothing_but_keeps_the_export(full_run, trl_env):
    env, _ = trl_env
    root = full_run["root"]
    recipe = dict(full_run["recipe"])
    recipe["trainer"] = {**recipe["trainer"], "export_path": str(root / "exports-again")}
    # another digest, declared compatible: accepted
    result = run_entry(
        env,
        write_final(root / "FINAL-again.yaml", recipe),
        attempt=str(root / "attempt-again"),
        task_dir=root / "task",
        digest="0" * 64,
        compatible=f"{'1' * 64},{env.digest}",
    )
    assert result.returncode == 0, explain(result)
    assert metrics(root / "attempt-again") == []
    assert (root / "ckpts" / "latest").read_text().strip() == "4"
    assert sorted(p.name for p in (root / "ckpts").iterdir() if p.name.startswith("global_step_")) == [
        "global_step_3",
        "global_step_4",
    ]
    assert (root / "exports-again" / "global_step_4" / "policy" / "model.safetensors").exists()


def test_a_pinned_checkpoint_of_another_run_starts_a_fresh_root_across_a_repin(full_run, trl_env, tmp_path):
    """`RLAUNCH_RESUME_FROM` pins step 3 of the uninterrupted run (its latest is 4); a run under
    another runtime digest, with an empty checkpoint root of its own, resumes exactly step 3."""
    env, _ = trl_env
    root = full_run["root"]
    recipe = dict(full_run["recipe"])
    recipe["trainer"] = {
        **recipe["trainer"],
        "ckpt_path": str(tmp_path / "fresh-ckpts"),
        "export_path": str(tmp_path / "exports"),
    }
    repinned = "0" * 64
    pin = {"checkpoint_root": f"file://{root / 'ckpts'}", "step": 3, "runtime_digest": env.digest}
    result = run_entry(
        env,
        write_final(tmp_path / "FINAL.yaml", recipe),
        attempt=str(tmp_path / "attempt"),
        task_dir=tmp_path / "task",
        digest=repinned,
        resume_from=json.dumps(pin),
    )
    assert result.returncode == 0, explain(result)
    assert json.loads((tmp_path / "attempt" / "model_load.json").read_text())["resumed_from_step"] == 3
    resumed = metrics(tmp_path / "attempt")
    assert [m["step"] for m in resumed] == [4]
    uninterrupted = {m["step"]: m for m in metrics(root / "attempt")}
    assert resumed[0]["reward_mean"] == pytest.approx(uninterrupted[4]["reward_mean"], rel=1e-3, abs=1e-6)
    written = json.loads((tmp_path / "fresh-ckpts" / "global_step_4" / "rlaunch_checkpoint.json").read_text())
    assert written["runtime_digest"] == repinned  # its own checkpoints, in its own root
    assert (root / "ckpts" / "latest").read_text().strip() == "4"  # the pinned root is only read

    wrong = {**pin, "runtime_digest": repinned}
    result = run_entry(
        env,
        write_final(
            tmp_path / "FINAL-wrong.yaml",
            {**recipe, "trainer": {**recipe["trainer"], "ckpt_path": str(tmp_path / "other")}},
        ),
        attempt=str(tmp_path / "attempt-wrong"),
        task_dir=tmp_path / "task",
        digest=repinned,
        resume_from=json.dumps(wrong),
    )
    assert result.returncode == 2, explain(result)
    assert f"written by runtime digest {env.digest}, not the pinned {repinned}" in result.stderr


def test_checkpoint_from_another_digest_is_refused(full_run, trl_env):
    env, _ = trl_env
    root = full_run["root"]
    other = "f" * 64
    result = run_entry(
        env, full_run["final"], attempt=str(root / "attempt-refused"), task_dir=root / "task", digest=other
    )
    assert result.returncode == 2, explain(result)
    message = result.stderr
    assert "global_step_4" in message
    assert env.digest in message and other in message
    assert "compatible_checkpoint_digests" in message and "fresh RL artifact version" in message
    assert not (root / "attempt-refused" / "metrics.jsonl").exists()
    assert not (root / "attempt-refused" / "model_load.json").exists()


def test_unhonoured_recipe_keys_are_refused(trl_env, tiny_assets, tmp_path):
    env, _ = trl_env
    unhonoured = {
        "trainer.hf_save_interval": 5,
        "trainer.algorithm.advantage_estimator": "rloo",
        "trainer.logger": "wandb",
    }
    result = run_small_recipe(env, tiny_assets, tmp_path, unhonoured)
    assert result.returncode == 2, explain(result)
    for key, value in unhonoured.items():
        assert f"{key} = {value!r}" in result.stderr, result.stderr
    assert "['console']" in result.stderr and "['grpo']" in result.stderr
    assert not (tmp_path / "ckpts").exists()


def test_two_slots_under_torchrun_train_together(trl_env, tiny_assets, tmp_path):
    env, _ = trl_env
    two_slots = {
        "trainer.placement.policy_num_gpus_per_node": 2,
        "trainer.placement.ref_num_gpus_per_node": 2,
        "generator.inference_engine.num_engines": 2,
        "trainer.micro_train_batch_size_per_gpu": 4,
        "trainer.max_training_steps": 2,
    }
    result = run_small_recipe(env, tiny_assets, tmp_path, two_slots, nproc=2)
    assert result.returncode == 0, explain(result)
    for rank in (0, 1):
        marker = json.loads((tmp_path / "att" / "joined" / f"trainer-rank-{rank}.json").read_text())
        assert marker["rank"] == rank and marker["world_size"] == 2
    lines = metrics(tmp_path / "att")
    assert [m["step"] for m in lines] == [1, 2]
    assert all(m["grad_norm"] and m["grad_norm"] > 0 for m in lines)
    step2 = tmp_path / "ckpts" / "global_step_2"
    assert (step2 / "rng_state_0.pth").exists() and (step2 / "rng_state_1.pth").exists()
    assert json.loads((step2 / "rlaunch_checkpoint.json").read_text())["world_size"] == 2
    assert _sha(step2 / "model.safetensors") != _sha(tiny_assets["model"] / "model.safetensors")
    assert (tmp_path / "exports" / "global_step_2" / "policy" / "config.json").exists()


def test_wrong_process_count_is_refused(trl_env, tiny_assets, tmp_path):
    env, _ = trl_env
    two_slots = {"trainer.placement.policy_num_gpus_per_node": 2, "generator.inference_engine.num_engines": 2}
    result = run_small_recipe(env, tiny_assets, tmp_path, two_slots)  # started as one process
    assert result.returncode == 2, explain(result)
    assert "--nproc_per_node=2" in result.stderr
