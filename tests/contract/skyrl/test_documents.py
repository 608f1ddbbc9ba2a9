"""Every composed document rlaunch produces for its experiments is a config SkyRL 0.4.0 accepts:
parsed by the real `SkyRLTrainConfig.from_cli_overrides` from the adapter's dotlist and passed by
the real `validate_cfg` (`rlaunch_skyrl.driver.config` does exactly that, as the job would)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.documents import composed_document, experiment_steps

pytestmark = pytest.mark.skyrl
STEPS = experiment_steps()


@pytest.mark.parametrize("shape", sorted(STEPS))
def test_composed_document_parses_and_passes_validate_cfg(
    shape: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rlaunch_skyrl.driver import config

    monkeypatch.setenv("WANDB_API_KEY", "contract-test-not-a-key")  # validate_cfg wants it for logger: wandb
    document = composed_document(STEPS[shape], str(tmp_path / "prefix"))
    cfg = config(document)
    skyrl = document["skyrl"]
    assert cfg.trainer.strategy == skyrl["trainer"]["strategy"]
    assert cfg.trainer.placement.policy_num_gpus_per_node == skyrl["trainer"]["placement"]["policy_num_gpus_per_node"]
    assert cfg.generator.inference_engine.num_engines == skyrl["generator"]["inference_engine"]["num_engines"]
    assert cfg.trainer.run_name == document["run"]["artifact"] and "@" in cfg.trainer.run_name
    assert cfg.trainer.ckpt_path == document["artifacts"]["checkpoint_root"]
    # export_hf=True: SkyRL exports the final step (hf_save_interval > 0), though the recipe says -1
    assert skyrl["trainer"]["hf_save_interval"] == -1 and cfg.trainer.hf_save_interval > 0
    if skyrl["trainer"]["max_training_steps"]:
        assert cfg.trainer.hf_save_interval == skyrl["trainer"]["max_training_steps"]


def test_the_64_gpu_example_is_the_plan_the_readme_shows(tmp_path: Path) -> None:
    document = composed_document(STEPS["rl_plan_example-64gpu"], str(tmp_path))
    placement = document["skyrl"]["trainer"]["placement"]
    engines = document["skyrl"]["generator"]["inference_engine"]
    assert (placement["policy_num_nodes"], placement["policy_num_gpus_per_node"], placement["colocate_all"]) == (
        4,
        8,
        False,
    )
    assert (engines["num_engines"], engines["tensor_parallel_size"], engines["data_parallel_size"]) == (4, 1, 8)


def test_a_pinned_start_is_resume_from_path_as_skyrl_reads_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run pinned to another checkpoint (`RLAUNCH_RESUME_FROM`) with an empty root of its own is
    handed to SkyRL as `resume_mode: from_path` at the pinned `global_step_<N>` (the directory
    SkyRL's `load_checkpoints` requires for that mode), a config SkyRL's `validate_cfg` accepts."""
    import json

    from rlaunch_skyrl.checkpoints import META, start_from_pin
    from rlaunch_skyrl.driver import config
    from skyrl.train.utils.trainer_utils import ResumeMode

    monkeypatch.setenv("WANDB_API_KEY", "contract-test-not-a-key")
    pinned = tmp_path / "old" / "global_step_3"
    pinned.mkdir(parents=True)
    (pinned / META).write_text(json.dumps({"global_step": 3, "runtime_digest": "a" * 64}))
    document = composed_document(STEPS["fsdp-smoke"], str(tmp_path / "prefix"))
    pin = json.dumps({"checkpoint_root": str(tmp_path / "old"), "step": 3, "runtime_digest": "a" * 64})
    cfg = config(start_from_pin(document, pin))
    assert ResumeMode(cfg.trainer.resume_mode) == ResumeMode.FROM_PATH and cfg.trainer.resume_path == str(pinned)
    assert cfg.trainer.ckpt_path == document["artifacts"]["checkpoint_root"]  # its own checkpoints: its own root
