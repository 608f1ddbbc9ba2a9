"""What trl-cpu honours: one declaration (profile.yaml) read by the launcher and by the adapter;
`unsupported_settings`; the SkyRL -> GRPOConfig translation; storage on fsspec URLs."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml

from rlaunch.runtimes.registry import Capabilities, get_profile, unsupported_settings
from tests.support.adapters import ADAPTER_DIR, import_adapter

from .helpers import compose

adapter = import_adapter()
recipe_mod = adapter.recipe


@pytest.fixture()
def profile():
    return get_profile("trl-cpu")


def _console(**overrides):
    return compose({"trainer.logger": "console", "trainer.policy.model.path": "/m", **overrides})


# ---------------------------------------------------------------- one source of truth


def test_adapter_reads_its_capabilities_from_the_profile_file(tmp_path, monkeypatch):
    """The adapter has no table of its own: widen the profile file and the adapter accepts more."""
    source = recipe_mod.profile_path()
    recipe = _console(**{"trainer.logger": "wandb", "trainer.hf_save_interval": 5})
    defaults = recipe_mod.load_base_config()
    assert {k for k, _, _ in recipe_mod.unsupported(recipe, defaults)} == {"trainer.logger", "trainer.hf_save_interval"}
    widened = yaml.safe_load(source.read_text())
    widened["capabilities"]["allowed_values"]["trainer.logger"] = ["console", "wandb"]
    widened["capabilities"]["honoured_keys"]["trainer.hf_save_interval"] = "test: now honoured"
    (tmp_path / "profile.yaml").write_text(yaml.safe_dump(widened))
    monkeypatch.setenv(recipe_mod.PROFILE_ENV, str(tmp_path / "profile.yaml"))
    assert recipe_mod.unsupported(recipe, defaults) == []


def test_adapter_finds_the_same_profile_as_the_launcher(profile, monkeypatch):
    monkeypatch.delenv(recipe_mod.PROFILE_ENV, raising=False)
    caps = recipe_mod.load_capabilities()
    assert caps.honoured == profile.capabilities.honoured_keys
    assert caps.allowed == {k: list(v) for k, v in profile.capabilities.allowed_values.items()}


def test_allowed_env_classes_are_the_registered_rewards(profile):
    assert sorted(profile.capabilities.allowed_values["environment.env_class"]) == adapter.rewards.names()


def test_every_honoured_key_exists_in_the_base_config(profile):
    leaves = set(recipe_mod.flatten(profile.base_config()))
    assert profile.capabilities.honoured_keys
    for key in profile.capabilities.honoured_keys:
        if key.endswith(".*"):
            assert any(leaf.startswith(key[:-1]) for leaf in leaves), key
        else:
            assert key in leaves, key


def test_adapter_finds_the_same_base_config_as_the_profile(profile, monkeypatch):
    monkeypatch.delenv(recipe_mod.BASE_CONFIG_ENV, raising=False)
    assert recipe_mod.load_base_config() == profile.base_config()


def test_adapter_never_imports_rlaunch():
    for path in sorted((ADAPTER_DIR / "rlaunch_trl_cpu").glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            assert not any(n == "rlaunch" or n.startswith("rlaunch.") for n in names), (path.name, names)


# ---------------------------------------------------------------- unsupported_settings


def test_unsupported_settings_accepts_a_console_recipe(profile):
    assert unsupported_settings(profile, _console()) == []


def test_unsupported_settings_reports_every_problem(profile):
    recipe = _console(
        **{
            "trainer.logger": "wandb",
            "trainer.hf_save_interval": 5,
            "trainer.algorithm.advantage_estimator": "rloo",
            "trainer.placement.colocate_all": False,
            "trainer.no_such_key": 1,
        }
    )
    found = {key: (value, reason) for key, value, reason in unsupported_settings(profile, recipe)}
    assert set(found) == {
        "trainer.logger",
        "trainer.hf_save_interval",
        "trainer.algorithm.advantage_estimator",
        "trainer.placement.colocate_all",
        "trainer.no_such_key",
    }
    assert found["trainer.logger"][0] == "wandb" and "['console']" in found["trainer.logger"][1]
    assert "default -1" in found["trainer.hf_save_interval"][1]
    assert "not a key" in found["trainer.no_such_key"][1]


def test_unsupported_settings_allows_honoured_values_and_wildcards(profile):
    recipe = _console(
        **{
            "trainer.placement.policy_num_gpus_per_node": 2,  # trainer.placement.* is honoured
            "generator.inference_engine.num_engines": 2,
            "trainer.algorithm.loss_reduction": "sequence_mean",
            "trainer.resume_mode": None,
            "trainer.policy.optimizer_config.lr": 0.001,
            "environment.env_class": "arithmetic",
        }
    )
    assert unsupported_settings(profile, recipe) == []


def test_unsupported_settings_keeps_booleans_apart_from_integers(profile):
    recipe = _console(**{"trainer.placement.colocate_all": 1})
    assert [k for k, _, _ in unsupported_settings(profile, recipe)] == ["trainer.placement.colocate_all"]


def test_unsupported_settings_without_declared_keys_honours_everything(profile):
    from dataclasses import replace

    everything = replace(profile, capabilities=Capabilities(accelerator="gpu"))
    assert unsupported_settings(everything, compose({"trainer.hf_save_interval": 5})) == []


def test_capabilities_normalise_lists():
    caps = Capabilities(accelerator="cpu", honoured_keys=["a.*", "b"], allowed_values={"b": [1, 2], "c": "x"})
    assert caps.honoured_keys == ("a.*", "b")
    assert caps.allowed_values["b"] == (1, 2) and caps.allowed_values["c"] == ("x",)
    assert caps.honours("a.q") and caps.honours("b") and not caps.honours("ab")
    assert caps.accepts("b", 2) and not caps.accepts("b", 3) and caps.accepts("zzz", object())


def test_adapter_refusal_agrees_with_the_launcher(profile):
    recipe = _console(**{"trainer.logger": "wandb", "trainer.hf_save_interval": 5})
    launcher = {k for k, _, _ in unsupported_settings(profile, recipe)}
    runtime = {k for k, _, _ in recipe_mod.unsupported(recipe, profile.base_config())}
    assert launcher == runtime == {"trainer.logger", "trainer.hf_save_interval"}


# ---------------------------------------------------------------- translation


def test_grpo_mapping_follows_skyrl_batch_semantics():
    recipe = _console(
        **{
            "trainer.train_batch_size": 8,
            "trainer.policy_mini_batch_size": 4,
            "trainer.micro_train_batch_size_per_gpu": 2,
            "generator.n_samples_per_prompt": 4,
            "trainer.max_training_steps": 3,
            "trainer.ckpt_interval": 2,
            "trainer.algorithm.kl_loss_coef": 0.05,
            "trainer.algorithm.eps_clip_high": 0.28,
            "trainer.algorithm.loss_reduction": "seq_mean_token_sum_norm",
            "trainer.algorithm.grpo_norm_by_std": False,
            "generator.sampling_params.top_k": -1,
            "generator.sampling_params.min_p": 0.0,
            "trainer.placement.policy_num_gpus_per_node": 2,
            "generator.inference_engine.num_engines": 2,
        }
    )
    plan = recipe_mod.translate(recipe, world_size=2)
    g = plan.grpo
    assert g["num_generations"] == 4
    assert g["per_device_train_batch_size"] == 2
    assert g["gradient_accumulation_steps"] == (4 * 4 // 2) // 2 == 4
    assert g["steps_per_generation"] == (8 * 4 // 2) // 2 == 8
    assert g["beta"] == 0.05 and g["epsilon"] == 0.2 and g["epsilon_high"] == 0.28
    assert g["loss_type"] == "dr_grpo" and g["scale_rewards"] == "none"
    assert g["top_k"] == 0 and g["min_p"] is None
    assert g["use_cpu"] is True and g["bf16"] is False and g["report_to"] == [] and g["logging_steps"] == 1
    assert g["ddp_backend"] == "gloo"
    # one training step = train/mini = 2 optimizer steps
    assert plan.optimizer_steps_per_training_step == 2
    assert plan.ckpt_every == 4
    assert plan.with_rows(100).max_steps == 6
    # max_training_steps is a hard stop inside `epochs` passes over the data (SkyRL semantics)
    assert plan.with_rows(16).max_steps == (16 // 8) * 2  # 1 epoch = 2 training steps, k = 2


def test_translation_matches_trl_generation_arithmetic():
    """generation_batch_size = per_device * dp * steps_per_generation must be train*n (TRL's rule)."""
    for train, mini, micro, n, dp in [(4, 4, 4, 4, 1), (8, 2, 1, 2, 2), (16, 8, 4, 4, 2)]:
        overrides = {
            "trainer.train_batch_size": train,
            "trainer.policy_mini_batch_size": mini,
            "trainer.micro_train_batch_size_per_gpu": micro,
            "generator.n_samples_per_prompt": n,
            "trainer.placement.policy_num_gpus_per_node": dp,
            "generator.inference_engine.num_engines": dp,
        }
        g = recipe_mod.translate(_console(**overrides), world_size=dp).grpo
        assert g["per_device_train_batch_size"] * dp * g["steps_per_generation"] == train * n
        assert g["per_device_train_batch_size"] * dp * g["gradient_accumulation_steps"] == mini * n


def test_epochs_without_max_steps_drop_the_partial_batch():
    plan = recipe_mod.translate(
        _console(**{"trainer.train_batch_size": 4, "trainer.policy_mini_batch_size": 4, "trainer.epochs": 2}), 1
    )
    assert plan.with_rows(10).max_steps == 2 * (10 // 4)
    with pytest.raises(recipe_mod.RecipeRefused, match="only 3 usable prompt rows"):
        plan.with_rows(3)


def test_translation_refuses_batches_that_do_not_split():
    bad = _console(
        **{
            "trainer.train_batch_size": 6,
            "trainer.policy_mini_batch_size": 4,
            "generator.n_samples_per_prompt": 1,
        }
    )
    with pytest.raises(recipe_mod.RecipeRefused) as caught:
        recipe_mod.translate(bad, 1)
    keys = {k for k, _, _ in caught.value.violations}
    assert keys == {"trainer.policy_mini_batch_size", "generator.n_samples_per_prompt"}


def test_runtime_only_value_rules():
    recipe = _console(
        **{
            "trainer.ref.model.path": "/other",
            "generator.max_input_length": 999,
            "trainer.max_ckpts_to_keep": 0,
        }
    )
    keys = {k for k, _, _ in recipe_mod.unsupported(recipe, recipe_mod.load_base_config())}
    assert keys == {"trainer.ref.model.path", "generator.max_input_length", "trainer.max_ckpts_to_keep"}


# ---------------------------------------------------------------- rewards


def test_arithmetic_reward():
    arithmetic = adapter.rewards.get("arithmetic")
    assert arithmetic("The answer is 7.", "7") == 1.0
    assert arithmetic("3 + 4 = 7", "7") == 1.0
    assert 0.0 < arithmetic("8", "7") < 0.25
    assert arithmetic("no digits", "7") == 0.0
    assert adapter.rewards.get("gsm8k")("so #### 1,234", "1234") == 1.0
    with pytest.raises(adapter.rewards.UnknownRewardError, match="arithmetic"):
        adapter.rewards.get("nope")


# ---------------------------------------------------------------- storage on URLs


def test_checkpoint_store_on_memory_fs(tmp_path):
    import fsspec

    storage = adapter.storage
    store = adapter.checkpoints.CheckpointStore(f"memory://ckpt-test-{tmp_path.name}/ckpts")
    for step in (1, 2, 3):
        local = tmp_path / f"checkpoint-{step}"
        (local / "sub").mkdir(parents=True)
        (local / "model.safetensors").write_bytes(b"w" * step)
        (local / "sub" / "x.json").write_text("{}")
        store.publish(str(local), step, {"runtime_digest": "d1"})
        assert store.latest() == step
        store.prune(2)
    assert store.steps() == [2, 3]
    info = store.info(3)
    assert info["global_step"] == 3 and info["runtime_digest"] == "d1"
    fetched = storage.fetch_dir(store.step_dir(3), str(tmp_path / "fetched"))
    assert (Path(fetched) / "model.safetensors").read_bytes() == b"www"
    assert (Path(fetched) / "sub" / "x.json").exists()
    adapter.checkpoints.check_digest(store, 3, info, "d2", ["d1"])
    with pytest.raises(adapter.checkpoints.ResumeRefused, match="compatible_checkpoint_digests"):
        adapter.checkpoints.check_digest(store, 3, info, "d2", [])
    # a checkpoint written under another run fingerprint (a changed recipe) is refused too
    stamped = {**info, "run_fingerprint": "f1"}
    adapter.checkpoints.check_digest(store, 3, stamped, "d1", [], "f1")
    with pytest.raises(adapter.checkpoints.ResumeRefused, match="run fingerprint f1, but this run's is f2"):
        adapter.checkpoints.check_digest(store, 3, stamped, "d1", [], "f2")
    adapter.checkpoints.check_digest(store, 3, stamped, "d1", ["f1"], "f2")  # declared compatible
    fsspec.filesystem("memory").rm(f"/ckpt-test-{tmp_path.name}", recursive=True)


def test_prune_leaves_checkpoints_past_latest_alone(tmp_path):
    store = adapter.checkpoints.CheckpointStore(str(tmp_path / "ckpts"))
    local = tmp_path / "c"
    local.mkdir()
    (local / "w").write_text("w")
    store.publish(str(local), 9, {"runtime_digest": "old"})  # another trajectory's checkpoint
    for step in (1, 2, 3):
        store.publish(str(local), step, {"runtime_digest": "new"})
        store.prune(2)
    assert store.latest() == 3 and store.steps() == [2, 3, 9]


def test_metrics_writer_on_url_and_local(tmp_path):
    storage = adapter.storage
    for attempt in (f"memory://metrics-{tmp_path.name}", str(tmp_path / "attempt")):
        writer = storage.MetricsWriter(attempt)
        assert writer.write({"step": 1, "loss": 0.5})
        assert writer.write({"step": 2, "loss": 0.4})
        assert not writer.write({"step": 2, "loss": 0.4})  # strictly increasing
        lines = [json.loads(x) for x in storage.read_text(storage.join(attempt, "metrics.jsonl")).splitlines()]
        assert [x["step"] for x in lines] == [1, 2]
        # a resumed attempt writing into the same file drops lines past its checkpoint
        resumed = storage.MetricsWriter(attempt, resume_step=1)
        assert resumed.write({"step": 2, "loss": 0.3})
        lines = [json.loads(x) for x in storage.read_text(storage.join(attempt, "metrics.jsonl")).splitlines()]
        assert [(x["step"], x["loss"]) for x in lines] == [(1, 0.5), (2, 0.3)]
