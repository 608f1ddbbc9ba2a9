"""What SkyRL's trainer receives from rlaunch (W&B entity, project, run name; the HF export) and
the evidence rlaunch's callbacks write, driven through SkyRL's real callback classes and read
back with rlaunch's own `status` readers."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.documents import composed_document, experiment_steps

pytestmark = pytest.mark.skyrl


def test_wandb_gets_entity_project_and_the_artifact_name_at_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import wandb
    from rlaunch_skyrl.dotlist import tracker_environment
    from rlaunch_skyrl.driver import RlaunchExperiment, config
    from rlaunch_skyrl.evidence import wandb_record

    monkeypatch.setenv("WANDB_API_KEY", "contract-test-not-a-key")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.delenv("WANDB_ENTITY", raising=False)
    document = composed_document(experiment_steps()["rl_plan_example-64gpu"], str(tmp_path / "prefix"))
    experiment = RlaunchExperiment.__new__(RlaunchExperiment)  # only the tracker hook: no tokenizer, data or Ray
    experiment.cfg, experiment.env = config(document), tracker_environment(document)
    tracker = experiment.get_tracker()  # SkyRL's own get_tracker -> Tracking -> wandb.init
    try:
        run = wandb.run
        assert (run.entity, run.project, run.name) == (
            "my-lab",
            "gsm8k-grpo",
            "checkpoints/gsm8k-grpo-qwen3-8b@" + document["run"]["artifact"].split("@")[1],
        )
        recorded = wandb_record()  # what the evidence callback writes to wandb.json: the run itself
        assert recorded["run_id"] == run.id and (recorded["project"], recorded["entity"]) == ("gsm8k-grpo", "my-lab")
        assert recorded["mode"] == "offline" and recorded["url"] is None
        assert recorded["offline_dir"].startswith(str(tmp_path / "wandb" / "offline-run-"))
    finally:
        tracker.finish()


def test_callbacks_write_what_verify_smoke_reads(tmp_path: Path) -> None:
    from rlaunch_skyrl.evidence import Evidence, EvidenceContext
    from skyrl.train.config import SkyRLTrainConfig
    from skyrl.train.utils.callbacks import CallbackHandler, CallbackInput, TrainingControl

    from rlaunch.launch_config import schema
    from rlaunch.observe import collect

    model = tmp_path / "task" / "models" / "m"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    (model / "model.safetensors").write_bytes(b"weights")
    ckpts, exports, attempt = tmp_path / "ckpts", tmp_path / "exports", tmp_path / "attempt"
    cfg = SkyRLTrainConfig.from_cli_overrides([f"trainer.policy.model.path={model}", "trainer.max_training_steps=2"])
    trainer = SimpleNamespace(cfg=cfg, global_step=0)
    context = EvidenceContext(str(attempt), "models/m@1:abc", "d" * 64, str(ckpts), str(exports), True)
    handler, control = CallbackHandler([Evidence(context)]), TrainingControl()

    def fire(event: str, step: int, **fields: object) -> None:
        getattr(handler, event)(
            trainer, CallbackInput(global_step=step, epoch=0, total_steps=2, steps_per_epoch=2, **fields), control
        )

    fire("on_train_start", 0)
    fire("on_log", 0, logs={"eval/all/avg_score": 0.1})  # the evaluation before training: not a step
    for step in (1, 2):
        logs = {"trainer/global_step": step, "policy/final_loss": 0.5 / step, "reward/avg_raw_reward": 0.1 * step,
                "policy/policy_kl": 0.01, "policy/policy_lr": 1e-6}  # fmt: skip
        fire("on_log", step, logs=logs)
        (ckpts / f"global_step_{step}").mkdir(parents=True)
        (ckpts / "latest_ckpt_global_step.txt").write_text(str(step))
        fire("on_save", step, ckpt_path=str(ckpts / f"global_step_{step}"))
    export = exports / "global_step_2" / "policy"
    export.mkdir(parents=True)
    (export / "config.json").write_text("{}")
    (export / "model.safetensors").write_bytes(b"w")
    fire("on_train_end", 2)

    composed = composed_document(experiment_steps()["fsdp-smoke"], str(tmp_path / "prefix"))
    composed["skyrl"]["trainer"]["policy"]["model"]["path"] = str(model)
    composed["skyrl"]["trainer"]["max_training_steps"] = 2
    composed["artifacts"]["checkpoint_root"] = str(ckpts)
    doc = schema.from_dict(composed)
    loaded = collect._model(doc, str(attempt))
    assert loaded.recorded and loaded.loaded_path == str(model.resolve()) and loaded.identity == "models/m@1:abc"
    assert loaded.weight_files == {"model.safetensors": __import__("hashlib").sha256(b"weights").hexdigest()}
    steps = collect._steps(doc, str(attempt))
    assert (steps.count, steps.first_step, steps.latest_step, steps.final_step) == (2, 1, 2, 2)
    assert steps.last["loss"] == 0.25 and steps.last["reward_mean"] == pytest.approx(0.2) and steps.last["kl"] == 0.01
    checkpoints = collect._checkpoints(doc)
    assert checkpoints.steps == [1, 2] and checkpoints.latest_step == 2
    assert checkpoints.latest_meta["runtime_digest"] == "d" * 64
    replicas, trainers = collect._markers(str(attempt / "joined"))
    assert [t.rank for t in trainers] == [0] and trainers[0].world_size == 1
    assert json.loads((attempt / "export.json").read_text())["files"] == ["config.json", "model.safetensors"]
