"""Compose the document's recipe onto the runtime's base config and inject canonical values.

The recipe arrives with the role plan rendered in. Composition makes every key explicit; the
values rlaunch owns (model and data paths, checkpoint/export roots, retention, run name, seed,
export flag) are injected from the document so the trainer never reads ambient defaults.
"""

from __future__ import annotations

from typing import Any

from rlaunch import storage
from rlaunch.launch_config.layout import attempt_dir
from rlaunch.launch_config.recipe import set_path
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.launch_config.typed import DocumentError
from rlaunch.runtimes.registry import get_profile


def injected_values(doc: SkyRLLaunchConfig) -> dict[str, Any]:
    art, inputs = doc.artifacts, doc.inputs
    model = inputs.model.local_path
    return {
        "trainer.policy.model.path": model,
        "trainer.ref.model.path": model,
        "data.train_data": [storage.join(d.local_path, d.relative_path) for d in inputs.train_data],
        "data.val_data": [storage.join(d.local_path, d.relative_path) for d in inputs.validation_data],
        "trainer.ckpt_path": art.checkpoint_root,
        "trainer.export_path": art.export_root,
        "trainer.log_path": attempt_dir(art.attempts_root, doc.run.attempt_id),
        "trainer.max_ckpts_to_keep": art.resume_checkpoint_count,
        "trainer.run_name": doc.run.id,
        "trainer.export_hf_artifact": doc.run.export_hf,
        "trainer.resume_path": None,
    }


def compose_document(doc: SkyRLLaunchConfig) -> SkyRLLaunchConfig:
    """The resolved document: `skyrl` is the full composed tree with canonical values injected."""
    profile = get_profile(doc.runtime.profile)
    composed, problems = profile.compose(doc.skyrl)
    if problems:
        raise DocumentError([f"skyrl.{p.path}: {p.message}; {p.fix}" for p in problems], what="SkyRL recipe")
    for key, value in injected_values(doc).items():
        set_path(composed, key, value)
    return doc.replace_skyrl(composed)
