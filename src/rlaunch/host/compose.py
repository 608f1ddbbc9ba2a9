"""Inject canonical values into the document's composed recipe.

The recipe arrives with the role plan rendered in; validation (`host.validate`) composes it onto
the runtime's base config, which makes every key explicit and reports every problem. The values
rlaunch owns (model and data paths, checkpoint/export roots, retention, run name, seed,
export flag) are injected from the document so the trainer never reads ambient defaults.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from rlaunch import storage
from rlaunch.launch_config.composition import get_path, set_path
from rlaunch.launch_config.geometry import CRITIC_FROM_POLICY, CRITIC_MODEL_KEY
from rlaunch.launch_config.recipe_keys import DATA, ROLE, TRAINER, role_key
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.runs.layout import attempt_dir
from rlaunch.runs.resume import run_fingerprint


def injected_values(doc: SkyRLLaunchConfig) -> dict[str, Any]:
    art, inputs = doc.artifacts, doc.inputs
    model = inputs.model.local_path
    critic = {CRITIC_MODEL_KEY: model} if get_path(doc.skyrl, CRITIC_MODEL_KEY, None) == CRITIC_FROM_POLICY else {}
    return {
        role_key("policy", ROLE.MODEL_PATH): model,
        role_key("ref", ROLE.MODEL_PATH): model,
        **critic,  # the role plan's critic starts from the policy's model
        DATA.TRAIN_DATA: [storage.join(d.local_path, d.relative_path) for d in inputs.train_data],
        DATA.VAL_DATA: [storage.join(d.local_path, d.relative_path) for d in inputs.validation_data],
        TRAINER.CKPT_PATH: art.checkpoint_root,
        TRAINER.EXPORT_PATH: art.export_root,
        TRAINER.LOG_PATH: attempt_dir(art.attempts_root, doc.run.attempt_id),
        TRAINER.MAX_CKPTS_TO_KEEP: art.resume_checkpoint_count,
        TRAINER.RUN_NAME: doc.run.artifact or doc.run.id,
        TRAINER.RESUME_PATH: None,
    }


def compose_document(doc: SkyRLLaunchConfig, composed: Mapping[str, Any]) -> SkyRLLaunchConfig:
    """The resolved document: `skyrl` is `composed` (the validated composition of the document's
    recipe) with canonical values injected, and `run.fingerprint` is the run fingerprint of the
    document as rendered (what its checkpoints record; `launch_config.resume`)."""
    tree = copy.deepcopy(dict(composed))
    for key, value in injected_values(doc).items():
        set_path(tree, key, value)
    run = dataclasses.replace(doc.run, fingerprint=run_fingerprint(doc.to_dict()))
    return dataclasses.replace(doc.replace_skyrl(tree), run=run)
