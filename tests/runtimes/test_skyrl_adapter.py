"""The SkyRL 0.4.0 adapter's launcher-side logic: the dotlist it hands SkyRL and its checkpoint
guard. (SkyRL itself needs GPUs and Python 3.12; these parts are plain Python.)"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from rlaunch.runs.layout import latest_checkpoint
from rlaunch.runtimes.registry import get_profile

sys.path.insert(0, str(get_profile("fsdp").adapter_dir))

from rlaunch_skyrl.checkpoints import ForeignCheckpointError, guard, mirror  # noqa: E402
from rlaunch_skyrl.dotlist import to_dotlist  # noqa: E402


def test_dotlist_json_encodes_every_leaf() -> None:
    recipe = {
        "trainer": {
            "strategy": "fsdp",
            "policy": {"optimizer_config": {"lr": 1e-06}},
            "max_training_steps": None,
            "placement": {"colocate_all": False},
        },
        "data": {"train_data": ["/x/train.parquet"]},
        "generator": {"inference_engine": {"engine_init_kwargs": {}}},
    }
    assert to_dotlist(recipe) == [
        'trainer.strategy="fsdp"',
        "trainer.policy.optimizer_config.lr=1e-06",
        "trainer.max_training_steps=null",
        "trainer.placement.colocate_all=false",
        'data.train_data=["/x/train.parquet"]',
        "generator.inference_engine.engine_init_kwargs={}",
    ]


def test_every_fsdp_and_megatron_entrypoint_module_ships_with_the_adapter() -> None:
    for name in ("fsdp", "megatron"):
        profile = get_profile(name)
        for module in profile.entrypoints.values():
            assert (Path(profile.adapter_dir) / (module.replace(".", "/") + ".py")).is_file(), module


def skyrl_checkpoint(root: Path, step: int) -> None:
    (root / f"global_step_{step}").mkdir(parents=True)
    (root / "latest_ckpt_global_step.txt").write_text(str(step))


def test_guard_claims_the_root_and_mirror_writes_rlaunch_metadata(tmp_path: Path) -> None:
    guard(str(tmp_path), "latest", "a" * 64, [])
    skyrl_checkpoint(tmp_path, 5)
    killed = latest_checkpoint(str(tmp_path))  # before the adapter mirrored: the root's digest answers
    assert killed is not None and killed.step == 5 and killed.runtime_digest == "a" * 64
    assert mirror(str(tmp_path), "a" * 64) == 5
    assert (tmp_path / "latest").read_text() == "5"
    assert (
        json.loads((tmp_path / "global_step_5" / "rlaunch_checkpoint.json").read_text())["runtime_digest"] == "a" * 64
    )


def test_guard_refuses_checkpoints_of_another_digest_unless_declared_compatible(tmp_path: Path) -> None:
    guard(str(tmp_path), "latest", "a" * 64, [])
    skyrl_checkpoint(tmp_path, 3)
    with pytest.raises(ForeignCheckpointError, match="fresh RL artifact version"):
        guard(str(tmp_path), "latest", "b" * 64, [])
    guard(str(tmp_path), "none", "b" * 64, [])  # not resuming: the new runtime may start over
    guard(str(tmp_path), "latest", "c" * 64, ["b" * 64])  # declared compatible


def test_guard_refuses_checkpoints_of_another_run_fingerprint(tmp_path: Path) -> None:
    """A changed recipe (another run fingerprint) does not continue this root's checkpoints."""
    guard(str(tmp_path), "latest", "a" * 64, [], fingerprint="f" * 64)
    skyrl_checkpoint(tmp_path, 3)
    assert mirror(str(tmp_path), "a" * 64, "f" * 64) == 3
    assert latest_checkpoint(str(tmp_path)).fingerprint == "f" * 64
    guard(str(tmp_path), "latest", "a" * 64, [], fingerprint="f" * 64)  # the same run resumes
    with pytest.raises(ForeignCheckpointError, match="run fingerprint ffffffffffffffff"):
        guard(str(tmp_path), "latest", "a" * 64, [], fingerprint="e" * 64)
    guard(str(tmp_path), "latest", "a" * 64, ["f" * 64], fingerprint="e" * 64)  # declared compatible


def test_export_hf_asks_skyrl_for_an_hf_export_of_the_final_step() -> None:
    from rlaunch_skyrl.dotlist import NO_INTERVAL, trainer_tree

    def doc(export_hf: bool, **trainer: object) -> dict:
        return {"run": {"export_hf": export_hf}, "skyrl": {"trainer": {"hf_save_interval": -1, **trainer}}}

    assert trainer_tree(doc(True, max_training_steps=40))["trainer"]["hf_save_interval"] == 40
    assert trainer_tree(doc(True, max_training_steps=None))["trainer"]["hf_save_interval"] == NO_INTERVAL
    assert trainer_tree(doc(False, max_training_steps=40))["trainer"]["hf_save_interval"] == -1
    assert trainer_tree(doc(True, hf_save_interval=5))["trainer"]["hf_save_interval"] == 5  # the recipe's own cadence


def test_the_wandb_entity_reaches_the_trackers_environment() -> None:
    from rlaunch_skyrl.dotlist import tracker_environment

    assert tracker_environment({"cluster": {"wandb_entity": "my-lab"}}) == {"WANDB_ENTITY": "my-lab"}
    assert tracker_environment({"cluster": {"wandb_entity": None}}) == {}
