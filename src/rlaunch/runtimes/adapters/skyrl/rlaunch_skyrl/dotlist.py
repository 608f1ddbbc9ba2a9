"""The launch document as SkyRL 0.4.0 takes it: a dotlist of `key.path=<JSON value>` overrides,
with rlaunch's launch settings applied the way SkyRL implements them.

SkyRL 0.4.0 reads no YAML file; it parses `key.path=value` overrides with OmegaConf into typed
dataclasses. JSON-encoding every value keeps nulls, booleans and numeric-looking strings intact
through that parse.

Launch settings (the document's `run` and `cluster` sections, not SkyRL keys):

* `run.export_hf`: SkyRL writes an HF export only when `trainer.hf_save_interval > 0` (every N
  steps, at each epoch end and after the final step). When the recipe leaves it at -1 (no HF
  export during training), the export is requested for the final step by setting it to
  `trainer.max_training_steps` (or, without one, to a step count no run reaches, so only epoch
  ends and the final step export).
* `cluster.wandb_entity`: SkyRL's tracker calls `wandb.init(project=trainer.project_name,
  name=trainer.run_name)` and takes the entity from `WANDB_ENTITY`; the host injects the run name
  (the RL artifact's name@version) and the adapter sets `WANDB_ENTITY` in the trainer's process.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

NO_INTERVAL = 2**31 - 1  # an hf_save_interval no run reaches: export at epoch ends and the final step


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, path)
        else:
            yield path, value


def to_dotlist(skyrl: Mapping[str, Any]) -> list[str]:
    return [f"{path}={json.dumps(value, ensure_ascii=False)}" for path, value in _leaves(skyrl)]


def trainer_tree(document: Mapping[str, Any]) -> dict[str, Any]:
    """The document's composed `skyrl` tree with the launch settings SkyRL reads from it applied."""
    skyrl = copy.deepcopy(dict(document["skyrl"]))
    trainer = skyrl.setdefault("trainer", {})
    if (document.get("run") or {}).get("export_hf") and int(trainer.get("hf_save_interval", -1) or -1) <= 0:
        trainer["hf_save_interval"] = trainer.get("max_training_steps") or NO_INTERVAL
    return skyrl


def tracker_environment(document: Mapping[str, Any]) -> dict[str, str]:
    """Variables SkyRL's tracker reads from the environment (the W&B entity)."""
    entity = (document.get("cluster") or {}).get("wandb_entity")
    return {"WANDB_ENTITY": str(entity)} if entity else {}


def overrides(document: Mapping[str, Any]) -> list[str]:
    """The dotlist SkyRL's `SkyRLTrainConfig.from_cli_overrides` gets for this document."""
    return to_dotlist(trainer_tree(document))
