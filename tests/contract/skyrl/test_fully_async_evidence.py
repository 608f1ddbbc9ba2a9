"""The fully async trainer's evidence: SkyRL 0.4.0's real `FullyAsyncRayPPOTrainer` (its own
constructor checks and its own `train()` loop) runs two optimizer steps of the `fully_async`
experiment's config, and rlaunch's `status` readers see what verify-smoke needs: the trainer
joined, the model it loaded, steps advancing, checkpoints mirrored, the final export.

Only the work SkyRL hands its Ray workers is replaced on the instance (generation, the
policy update, weight sync, the workers' checkpoint shards, HF writes, old-checkpoint cleanup), as the synchronous test drives SkyRL's
callback handler with a plain trainer."""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.documents import composed_document, experiment_steps

pytestmark = pytest.mark.skyrl
STEPS = 2


class Prompts:
    """A train dataset of `size` prompts, as SkyRL's dataloader reads one (items and collate_fn)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"prompt": [{"role": "user", "content": f"q{index}"}], "uid": str(index)}

    @staticmethod
    def collate_fn(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return items


class Dispatch:
    """SkyRL's worker dispatch, with nothing behind it (no Ray workers, no inference engines)."""

    def init_weight_sync_state(self, client: Any) -> None: ...
    def save_checkpoint(self, model: str, path: str, tokenizer: Any) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)  # the workers' shards; SkyRL's trainer writes the rest

    async def save_weights_for_sampler(self) -> None: ...
    def get_timing_metrics(self) -> dict[str, float]:
        return {}

    def finalize_pending_saves(self, model: str) -> None: ...


def _document(tmp_path: Path, model: Path) -> dict[str, Any]:
    document = composed_document(experiment_steps()["fully_async"], str(tmp_path / "prefix"))
    trainer = document["skyrl"]["trainer"]
    trainer["policy"]["model"]["path"] = str(model)
    trainer.update(max_training_steps=STEPS, ckpt_interval=1, hf_save_interval=STEPS, eval_interval=-1)
    trainer["ckpt_path"], trainer["export_path"] = str(tmp_path / "ckpts"), str(tmp_path / "exports")
    trainer["enable_ray_gpu_monitor"] = False  # no Ray cluster to ask: the metric scrapers stay off
    document["skyrl"]["generator"]["inference_engine"]["enable_ray_prometheus_stats"] = False
    document["skyrl"]["data"]["dataloader"]["num_workers"] = 0
    return document


def _trainer(document: dict[str, Any], context: Any, logged: list[tuple[dict[str, Any], int, bool]]) -> Any:
    from rlaunch_skyrl.driver import config, evidence_hookup, trainer_class

    cfg = config(document)
    tracker = SimpleNamespace(  # SkyRL's console tracker's interface, keeping what it is given
        log=lambda data, step, commit=False: logged.append((dict(data), step, commit)), finish=lambda: None
    )
    trainer = trainer_class("fully_async")(
        cfg=cfg, tracker=tracker, tokenizer=None, train_dataset=Prompts(cfg.trainer.policy_mini_batch_size * STEPS),
        inference_engine_client=None, generator=None, **evidence_hookup("fully_async", context),
    )  # fmt: skip
    exports = Path(cfg.trainer.export_path)
    batch = [SimpleNamespace(uid=str(i)) for i in range(cfg.trainer.policy_mini_batch_size * STEPS)]

    async def generate_forever(buffer: Any) -> None:
        await asyncio.Event().wait()

    async def collect(buffer: Any, done: Any) -> tuple[list[Any], list[Any], bool]:
        start = (trainer.global_step - 1) * cfg.trainer.policy_mini_batch_size
        return batch[start : start + cfg.trainer.policy_mini_batch_size], [], False

    async def update_policy(training_input: Any) -> dict[str, Any]:
        step = trainer.global_step
        trainer.all_metrics.update({"policy/final_loss": 0.5 / step, "reward/avg_raw_reward": 0.1 * step})
        return {}

    def save_models() -> None:
        export = exports / f"global_step_{trainer.global_step}" / "policy"
        export.mkdir(parents=True, exist_ok=True)
        (export / "model.safetensors").write_bytes(b"w")

    trainer.dispatch = Dispatch()
    trainer.load_checkpoints = lambda: (0, None, set(), set(), None)  # a fresh run
    trainer._run_generate_for_a_group_loop = generate_forever
    trainer._collect_generation_mini_batch = collect
    trainer.convert_generation_group_mini_batch_to_training_input = lambda groups, dropped: None
    trainer._run_training = update_policy
    trainer.save_models = save_models
    trainer._cleanup_old_checkpoints = lambda: None  # SkyRL runs it on every Ray node
    return trainer


def test_the_fully_async_trainer_takes_no_callbacks(tmp_path: Path) -> None:
    """Why the fully async trainer is fed differently: SkyRL 0.4.0 refuses any callback."""
    from rlaunch_skyrl.driver import config, evidence_hookup
    from rlaunch_skyrl.evidence import Evidence, EvidenceContext
    from skyrl.train.fully_async_trainer import FullyAsyncRayPPOTrainer

    model = tmp_path / "m"
    model.mkdir()
    cfg = config(_document(tmp_path, model))
    evidence = Evidence(EvidenceContext(str(tmp_path / "a"), "models/m@1:abc", "d" * 64, "", "", False))
    with pytest.raises(NotImplementedError, match="Callbacks are not yet supported"):
        FullyAsyncRayPPOTrainer(
            cfg=cfg, tracker=None, tokenizer=None, train_dataset=Prompts(64), inference_engine_client=None,
            generator=None, callbacks=[evidence],
        )  # fmt: skip
    context = EvidenceContext(str(tmp_path / "a"), "", "d" * 64, "", "", False)
    assert "callbacks" not in evidence_hookup("fully_async", context)
    assert [type(c).__name__ for c in evidence_hookup("standard", context)["callbacks"]] == ["Evidence"]


def test_the_fully_async_trainer_writes_what_verify_smoke_reads(tmp_path: Path) -> None:
    from rlaunch_skyrl.evidence import EvidenceContext

    from rlaunch.launch_config import schema
    from rlaunch.observe import collect

    model = tmp_path / "task" / "models" / "m"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"architectures": ["Qwen3ForCausalLM"]}))
    (model / "model.safetensors").write_bytes(b"weights")
    document, attempt = _document(tmp_path, model), tmp_path / "attempt"
    trainer_section = document["skyrl"]["trainer"]
    context = EvidenceContext(
        str(attempt), "models/m@1:abc", "d" * 64, trainer_section["ckpt_path"], trainer_section["export_path"], True
    )
    logged: list[tuple[dict[str, Any], int, bool]] = []
    trainer = _trainer(document, context, logged)
    asyncio.run(trainer.train())

    assert [step for data, step, _ in logged if "trainer/global_step" in data] == [1, 2]  # SkyRL's own logging
    document["artifacts"]["checkpoint_root"] = trainer_section["ckpt_path"]
    doc = schema.from_dict(document)
    loaded = collect._model(doc, str(attempt))
    assert loaded.recorded and loaded.loaded_path == str(model.resolve()) and loaded.identity == "models/m@1:abc"
    assert loaded.weight_files == {"model.safetensors": hashlib.sha256(b"weights").hexdigest()}
    assert json.loads((attempt / "model_load.json").read_text())["resumed_from_step"] is None
    steps = collect._steps(doc, str(attempt))
    assert (steps.count, steps.first_step, steps.latest_step) == (STEPS, 1, STEPS)
    assert steps.last["loss"] == 0.25 and steps.last["reward_mean"] == pytest.approx(0.2)
    checkpoints = collect._checkpoints(doc)  # SkyRL's own saves, mirrored while training
    assert checkpoints.steps == [1, 2] and checkpoints.latest_step == STEPS  # the terminal one: the last step trained
    assert checkpoints.latest_meta["runtime_digest"] == "d" * 64
    replicas, trainers = collect._markers(str(attempt / "joined"))
    assert [t.rank for t in trainers] == [0]
    export = json.loads((attempt / "export.json").read_text())
    assert export["files"] == ["model.safetensors"] and export["global_step"] == trainer.global_step
