"""The SFT step's configuration against SkyRL 0.4.0's own SFT classes: what `rlaunch.training`
renders from the step's typed settings is accepted by `SFTConfig` and bridged and validated by
`build_skyrl_config_for_sft` (the adapter's `build_configs`, as the GPU run builds them), the batch
rule the step refuses by is SkyRL's own, and the staged conversations load as the `train` split
SkyRL's trainer reads. No GPU: the classes are constructed, not trained."""

from __future__ import annotations

import dataclasses
import json
import os
import types

import pytest

from rlaunch.training.warm_start import (
    EXPORT_AT_END,
    SftSettings,
    conversations,
    skyrl_sft_overrides,
    staged_conversations,
)

pytestmark = pytest.mark.skyrl

SETTINGS = SftSettings(epochs=2, batch_size=16, micro_batch=2, lr=2e-5, max_length=1024, seed=3)


def built(settings: SftSettings, gpus: int = 8, **extra: object):
    from rlaunch_skyrl.sft import build_configs

    rendered = skyrl_sft_overrides(settings, model="/models/base", data_dir="/data", export_dir="/exports", gpus=gpus)
    return build_configs({**rendered, **extra})


def test_the_rendered_config_is_accepted_by_skyrls_sft_classes_field_for_field() -> None:
    from skyrl.train.config.sft_config import TrainOnWhat

    cfg, trainer = built(SETTINGS)
    assert (cfg.strategy, cfg.model.path, cfg.train_datasets, cfg.train_dataset_splits) == (
        "fsdp", "/models/base", ["/data"], ["train"]
    )  # fmt: skip
    assert (cfg.placement.num_nodes, cfg.placement.num_gpus_per_node) == (1, 8)
    assert cfg.train_on_what == TrainOnWhat.LAST_ASSISTANT_MESSAGE and cfg.messages_key == "messages"
    assert (cfg.num_epochs, cfg.num_steps, cfg.batch_size, cfg.micro_train_batch_size_per_gpu) == (2, None, 16, 2)
    assert (cfg.max_length, cfg.optimizer_config.lr, cfg.seed) == (1024, 2e-5, 3)
    assert (cfg.export_path, cfg.hf_save_interval, cfg.ckpt_path) == ("/exports", EXPORT_AT_END, "")
    # the trainer config the workers receive: FSDP over the planned GPUs, the export where the adapter looks
    assert trainer.trainer.strategy == "fsdp" and trainer.trainer.policy.model.path == "/models/base"
    assert (trainer.trainer.placement.policy_num_nodes, trainer.trainer.placement.policy_num_gpus_per_node) == (1, 8)
    assert trainer.trainer.micro_train_batch_size_per_gpu == 2 and trainer.trainer.policy.optimizer_config.lr == 2e-5
    assert (trainer.trainer.export_path, trainer.trainer.hf_save_interval) == ("/exports", EXPORT_AT_END)
    assert trainer.trainer.algorithm.use_kl_loss is False


def test_steps_instead_of_epochs_are_accepted_as_skyrls_num_steps() -> None:
    cfg, _ = built(dataclasses.replace(SETTINGS, epochs=None, steps=7), gpus=1)
    assert (cfg.num_steps, cfg.placement.num_gpus_per_node) == (7, 1)


def test_a_key_skyrls_sft_config_does_not_have_is_refused_so_acceptance_means_something() -> None:
    with pytest.raises(Exception, match="learning_rate"):
        built(SETTINGS, **{"optimizer_config.learning_rate": 1e-5})
    with pytest.raises(ValueError, match="num_epochs must be > 0"):
        built(SETTINGS, num_epochs=0)


@pytest.mark.parametrize(
    ("batch", "micro", "gpus"),
    [(16, 2, 8), (16, 4, 8), (16, 2, 16), (8, 8, 1), (12, 8, 1), (24, 3, 8), (6, 2, 4), (32, 4, 2)],
)
def test_the_batch_rule_the_step_refuses_by_is_skyrls_own(batch: int, micro: int, gpus: int) -> None:
    from skyrl.train.sft_trainer import SFTTrainer

    settings = dataclasses.replace(SETTINGS, batch_size=batch, micro_batch=micro)
    cfg, _ = built(settings, gpus=gpus)
    try:
        SFTTrainer._validate_batch_parallelism(types.SimpleNamespace(sft_cfg=cfg))
        skyrl_accepts = True
    except ValueError:
        skyrl_accepts = False
    assert (settings.batch_problem(gpus) is None) is skyrl_accepts


def test_the_staged_conversations_load_as_the_train_split_skyrl_reads(tmp_path) -> None:
    from datasets import load_dataset

    rows = [json.dumps({"prompt": [{"role": "user", "content": f"{i} + 1?"}], "answer": str(i + 1)}) for i in range(3)]
    staged_conversations(conversations("\n".join(rows), "answer", "rows"), str(tmp_path))
    cfg, _ = built(SETTINGS)
    split = load_dataset(str(tmp_path), split=cfg.train_dataset_splits[0])
    assert split.num_rows == 3 and cfg.messages_key in split.column_names
    assert split[2][cfg.messages_key][-1] == {"role": "assistant", "content": "3"}


def test_the_adapter_moves_the_last_steps_export(tmp_path) -> None:
    from rlaunch_skyrl.sft import final_export

    with pytest.raises(SystemExit, match="exported no HF model"):
        final_export(str(tmp_path))
    for step in (2, 10):
        (tmp_path / f"global_step_{step}" / "policy").mkdir(parents=True)
        (tmp_path / f"global_step_{step}" / "policy" / "config.json").write_text("{}")
    assert final_export(str(tmp_path)) == str(tmp_path / "global_step_10" / "policy")  # 10 after 2, not before


def test_skyrl_trains_on_the_response_only_of_the_staged_conversations(tmp_path) -> None:
    import subprocess
    import sys

    from skyrl.train.sft_trainer import tokenize_chat_example
    from transformers import AutoTokenizer

    from rlaunch.runtimes.registry import get_profile

    tiny = get_profile("trl-cpu").adapter_dir
    subprocess.run(  # the smoke's ChatML tokenizer, built here (transformers and tokenizers only)
        [sys.executable, "-m", "rlaunch_trl_cpu.tiny", "tokenizer", "--out", str(tmp_path / "tok"), "--seed", "0"],
        env={**os.environ, "PYTHONPATH": tiny}, check=True, capture_output=True,
    )  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(str(tmp_path / "tok"), padding_side="left")
    row = json.dumps({"prompt": [{"role": "user", "content": "What is 6 + 6?"}], "answer": "12"})
    (example,) = conversations(row, "answer", "rows")
    tokens = tokenize_chat_example(example, tokenizer, max_length=64, messages_key="messages")
    trained = tokens["input_ids"][-tokens["num_actions"] :]
    assert tokenizer.decode(trained) == "12<|im_end|>\n" and all(tokens["loss_mask"])
