"""Supervised fine-tuning with SkyRL 0.4.0's own SFT path (`SFTTrainer`, FSDP on the node's GPUs).

    python -m rlaunch_skyrl.sft --config FILE.json --out DIR

`FILE.json` holds the dotted overrides of SkyRL's `SFTConfig` exactly as `rlaunch.training` renders
them from the step's typed settings (`skyrl_sft_overrides`): nothing is added here. The adapter
builds the config with SkyRL's own classes (`SFTConfig.from_cli_overrides`, which refuses an unknown
key, and `build_skyrl_config_for_sft`, which validates it), starts Ray on this node as
`skyrl.train.main_sft` does, trains in a Ray task (the head process only drives), records each
step's loss through a `TrainingCallback`, and moves the final HF export (`export_path/global_step_N/policy`)
to `--out`. Prints one JSON line: the steps, every step's loss, the first and last, the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from typing import Any

STEP_DIR = re.compile(r"^global_step_(\d+)$")  # SkyRL's GLOBAL_STEP_PREFIX


def build_configs(overrides: dict[str, Any]) -> tuple[Any, Any]:
    """SkyRL's `SFTConfig` from the rendered overrides, and the trainer config it bridges to (validated)."""
    from skyrl.train.config.sft_config import SFTConfig, build_skyrl_config_for_sft

    cfg = SFTConfig.from_cli_overrides(overrides)
    return cfg, build_skyrl_config_for_sft(cfg)


def final_export(export_dir: str) -> str:
    """The HF model of the last step under `export_dir`; refuses an export directory without one."""
    steps = sorted(
        (int(m.group(1)), name) for name in os.listdir(export_dir) if (m := STEP_DIR.match(name))
    ) if os.path.isdir(export_dir) else []  # fmt: skip
    policy = os.path.join(export_dir, steps[-1][1], "policy") if steps else ""
    if not os.path.isfile(os.path.join(policy, "config.json")):
        raise SystemExit(
            f"rlaunch_skyrl.sft: SkyRL exported no HF model under {export_dir} (global_step_N/policy/config.json); "
            "its log above says why"
        )
    return policy


def train(cfg: Any, skyrl_cfg: Any) -> list[float]:
    """Run SkyRL's SFT in a Ray task (as `main_sft` does); every step's loss."""
    import ray
    from skyrl.train.sft_trainer import SFTTrainer
    from skyrl.train.utils.callbacks import TrainingCallback
    from skyrl.train.utils.utils import initialize_ray

    class Losses(TrainingCallback):
        def __init__(self) -> None:
            self.losses: list[float] = []

        def on_step_end(self, trainer: Any, callback_input: Any, control: Any) -> None:
            metrics = callback_input.metrics or {}
            if "loss" in metrics:
                self.losses.append(float(metrics["loss"]))

    @ray.remote(num_cpus=1)
    def run(cfg: Any, skyrl_cfg: Any) -> list[float]:
        losses = Losses()
        trainer = SFTTrainer(cfg, skyrl_cfg=skyrl_cfg, callbacks=[losses])
        trainer.setup()
        trainer.train()
        trainer.shutdown()
        return losses.losses

    initialize_ray(skyrl_cfg)
    try:
        result: list[float] = ray.get(run.remote(cfg, skyrl_cfg))
    finally:
        ray.shutdown()  # before the JSON line: nothing of Ray's may print after it
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlaunch_skyrl.sft", description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, help="the SFTConfig overrides rlaunch rendered (JSON)")
    parser.add_argument("--out", required=True, help="where the final HF model is moved")
    args = parser.parse_args(argv)
    started = time.time()
    with open(args.config, encoding="utf-8") as handle:
        overrides = json.load(handle)
    cfg, skyrl_cfg = build_configs(overrides)
    losses = train(cfg, skyrl_cfg)
    shutil.move(final_export(cfg.export_path), args.out)
    info = {
        "kind": "sft",
        "out": os.path.abspath(args.out),
        "steps": len(losses),
        "losses": losses,
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "seconds": round(time.time() - started, 2),
    }
    sys.stdout.write(json.dumps(info, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
