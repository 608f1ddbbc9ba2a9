"""What `rlaunch status` / `verify-smoke` read, written from inside SkyRL through its callback API.

`Evidence` is a `skyrl.train.utils.callbacks.TrainingCallback` handed to the trainer's constructor
(`RayPPOTrainer(callbacks=[...])`); nothing in SkyRL is patched. The fully async trainer refuses
callbacks, so `rlaunch_skyrl.fully_async` feeds the same records from its own step counter and
tracker (`started`, `logged`, `saved`, `ended`, which the callbacks call too). Under the attempt directory
(`RLAUNCH_ATTEMPT_DIR`, a local path or fsspec URL), in the formats the trl-cpu runtime writes:

* `joined/trainer-rank-0.json`   the trainer process (SkyRL's driver task) joined: rank, world
                                 size 1, host, pid, time, and SkyRL's policy world size
* `model_load.json`              the model path SkyRL's config handed its workers (the path it
                                 loads), its weight files' sha256, identity, architecture, and the
                                 step a resume started from
* `metrics.jsonl`                one line per SkyRL training step (`on_log` after the step):
                                 step, loss, reward_mean, kl, learning_rate, time; with
                                 train_batch_size == policy_mini_batch_size (and one update epoch)
                                 a training step is one optimizer step
* checkpoints (`on_save`)        `rlaunch_checkpoint.json` in SkyRL's `global_step_<N>/` and the
                                 `latest` marker (`checkpoints.mirror`)
* `export.json` (`on_train_end`) the HF export SkyRL wrote for the final step, and its files
* `wandb.json` (`on_train_start`) the W&B run SkyRL's tracker created (id, project, entity, URL;
                                 offline: its run directory), read from `wandb.run` itself
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import fsspec
from skyrl.train.utils.callbacks import TrainingCallback

from rlaunch_skyrl.checkpoints import mirror
from rlaunch_skyrl.weights import weight_files, weights_sha256

# SkyRL's logged metric -> rlaunch's metrics.jsonl field (first present wins)
METRIC_KEYS: dict[str, tuple[str, ...]] = {
    "loss": ("policy/final_loss", "policy/policy_loss"),
    "reward_mean": ("reward/avg_raw_reward", "loss/avg_final_rewards"),
    "kl": ("policy/policy_kl",),
    "learning_rate": ("policy/policy_lr",),
    "entropy": ("policy/policy_entropy",),
}


@dataclass(frozen=True)
class EvidenceContext:
    """What the callbacks need from the launch (pickled into SkyRL's remote driver task)."""

    attempt_dir: str
    identity: str
    runtime_digest: str
    checkpoint_root: str
    export_root: str
    export_hf: bool
    run_fingerprint: str = ""


def _write_json(url: str, value: Any) -> None:
    fs, path = fsspec.core.url_to_fs(url)
    fs.makedirs(os.path.dirname(path), exist_ok=True)
    fs.pipe_file(path, (json.dumps(value, indent=2, sort_keys=True, default=str) + "\n").encode())


def _join(*parts: str) -> str:
    return "/".join([parts[0].rstrip("/"), *(p.strip("/") for p in parts[1:])])


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def model_load_record(configured: str, identity: str, resumed_from_step: int | None) -> dict[str, Any]:
    """The model SkyRL was configured to load (its workers load `trainer.policy.model.path`)."""
    loaded = os.path.realpath(configured) if os.path.isdir(configured) else configured
    files = weight_files(loaded)
    architecture = None
    config = os.path.join(loaded, "config.json")
    if os.path.isdir(loaded) and os.path.exists(config):
        with open(config, encoding="utf-8") as handle:
            architecture = (json.load(handle).get("architectures") or [None])[0]
    return {
        "configured_path": configured,
        "loaded_path": loaded,
        "identity": identity,
        "weights_sha256": weights_sha256(files),
        "weight_files": files,
        "architecture": architecture,
        "resumed_from_step": resumed_from_step,
        "loader": "skyrl",
        "time": time.time(),
    }


def wandb_record() -> dict[str, Any] | None:
    """The W&B run this process logs to, as wandb itself reports it (None: no run, or no wandb)."""
    import sys

    run = getattr(sys.modules.get("wandb"), "run", None)
    if run is None:
        return None
    mode = str(getattr(run.settings, "mode", "") or "")
    offline = mode in ("offline", "dryrun")
    return {
        "run_id": run.id,
        "project": run.project,
        "entity": run.entity,
        "name": run.name,
        "url": None if offline else run.url,
        "mode": mode,
        "offline_dir": str(run.settings.sync_dir) if offline else None,
    }


def metrics_line(step: int, logs: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"step": step, "training_step": step, "time": time.time()}
    for field, keys in METRIC_KEYS.items():
        record[field] = next((_number(logs[k]) for k in keys if k in logs), None)
    return record


class Evidence(TrainingCallback):
    """SkyRL training events -> rlaunch's run evidence (see the module docstring)."""

    def __init__(self, context: EvidenceContext) -> None:
        self.context = context
        self.metrics_url = _join(context.attempt_dir, "metrics.jsonl")
        self.lines: list[str] = []
        self.last_step = -1

    def on_train_start(self, trainer: Any, callback_input: Any, control: Any) -> None:
        self.started(trainer.cfg, callback_input.global_step)

    def on_log(self, trainer: Any, callback_input: Any, control: Any) -> None:
        self.logged(callback_input.logs or {})

    def on_save(self, trainer: Any, callback_input: Any, control: Any) -> None:
        self.saved()

    def on_train_end(self, trainer: Any, callback_input: Any, control: Any) -> None:
        self.ended(callback_input.global_step)

    # The records themselves, from plain values: the callbacks above and the fully async trainer
    # (`rlaunch_skyrl.fully_async`, which fires no callbacks) both call these.

    def started(self, cfg: Any, global_step: int) -> None:
        """Training starts at `global_step` (0, or the step a resume loaded)."""
        placement = cfg.trainer.placement
        _write_json(
            _join(self.context.attempt_dir, "joined", "trainer-rank-0.json"),
            {
                "rank": 0,
                "world_size": 1,
                "host": socket.gethostname(),
                "pid": os.getpid(),
                "time": time.time(),
                "policy_world_size": placement.policy_num_nodes * placement.policy_num_gpus_per_node,
            },
        )
        record = model_load_record(cfg.trainer.policy.model.path, self.context.identity, global_step or None)
        _write_json(_join(self.context.attempt_dir, "model_load.json"), record)
        wandb_run = wandb_record()  # the tracker was created before the trainer, in this task
        if wandb_run is not None:
            _write_json(_join(self.context.attempt_dir, "wandb.json"), wandb_run)

    def logged(self, logs: dict[str, Any]) -> None:
        """SkyRL logged `logs`; a training step's carry `trainer/global_step` (an evaluation's do not)."""
        if "trainer/global_step" not in logs:  # the evaluation before training, not a step
            return
        step = int(logs["trainer/global_step"])
        if step <= self.last_step:
            return
        self.last_step = step
        self.lines.append(json.dumps(metrics_line(step, logs), sort_keys=True, allow_nan=True))
        fs, path = fsspec.core.url_to_fs(self.metrics_url)
        fs.makedirs(os.path.dirname(path), exist_ok=True)
        fs.pipe_file(path, "".join(f"{line}\n" for line in self.lines).encode())

    def saved(self) -> None:
        mirror(self.context.checkpoint_root, self.context.runtime_digest, self.context.run_fingerprint)

    def ended(self, global_step: int) -> None:
        """Training ended at `global_step`, the step SkyRL's final HF export is named by."""
        export = _join(self.context.export_root, f"global_step_{global_step}", "policy")
        fs, path = fsspec.core.url_to_fs(export)
        files = sorted(os.path.basename(p.rstrip("/")) for p in fs.ls(path, detail=False)) if fs.exists(path) else []
        _write_json(
            _join(self.context.attempt_dir, "export.json"),
            {
                "wanted": self.context.export_hf,
                "global_step": global_step,
                "uri": export if files else None,
                "files": files,
            },
        )
