"""rlaunch's adapter for the `trl-cpu` runtime: TRL's GRPO trainer on CPU, fed a composed SkyRL recipe.

This package runs inside the runtime's own environment (built from the profile's lock), never
inside the launcher: it must not import `rlaunch`. Modules:

* `entry`     - `python -m rlaunch_trl_cpu.entry --config FINAL.yaml` (loads the launch document,
                calls `trainer.run(doc["skyrl"])`).
* `trainer`   - `run(skyrl)`: the runtime entrypoint (TRL `GRPOTrainer`, records, checkpoints,
                resume, export). Heavy imports happen inside `run`.
* `recipe`    - the SkyRL-recipe -> `GRPOConfig` translation, the honoured-keys table, refusals.
* `rewards`   - registry of verifiable reward functions by `environment.env_class`.
* `data`      - reading SkyRL-shaped prompt rows from .jsonl / .parquet files.
* `storage`   - local-or-fsspec records: model-load record, join markers, metrics.jsonl.
* `checkpoints` - `{ckpt_path}/global_step_<N>/`, `latest` marker, retention, digest checks.
* `tiny`      - build a tiny tokenizer and a tiny random Qwen3 locally (no hub access).
* `evaluate`  - generate with a saved model and score with a registered reward.
"""

import os

__all__ = ["ADAPTER_NAME"]

# One device slot is one core: every process of this runtime computes on one thread, as torchrun
# already gives each of its processes. With torch's default (a thread per core) two processes on
# busy cores (a sweep's gangs side by side, a step job beside a trainer) wait on each other's
# OpenMP barriers: a trainer beside three busy processes took 3x the wall time. Set before any
# module of the package imports torch; an OMP_NUM_THREADS the process was given is kept.
os.environ.setdefault("OMP_NUM_THREADS", "1")

ADAPTER_NAME = "trl-cpu"
