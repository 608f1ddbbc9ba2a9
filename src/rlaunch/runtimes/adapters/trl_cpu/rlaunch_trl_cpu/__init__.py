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

__all__ = ["ADAPTER_NAME"]

ADAPTER_NAME = "trl-cpu"
