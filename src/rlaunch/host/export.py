"""The terminal export: the HF model the trainer exported from its terminal checkpoint, verified portable."""

from __future__ import annotations

from dataclasses import dataclass

from rlaunch import storage
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.runs.layout import export_policy_dir, latest_checkpoint

WEIGHT_SUFFIXES = (".safetensors", ".bin")
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


class ExportError(RuntimeError):
    pass


@dataclass(frozen=True)
class ExportedPolicy:
    policy_export_uri: str
    global_step: int
    tokenizer_revision: str
    checkpoint_root: str
    terminal_manifest_uri: str


def terminal_export(doc: SkyRLLaunchConfig) -> ExportedPolicy:
    """The verified export of the terminal checkpoint; raises ExportError saying what is missing."""
    art = doc.artifacts
    info = latest_checkpoint(art.checkpoint_root)
    if info is None:
        raise ExportError(f"the run committed no checkpoint marker under {art.checkpoint_root}")
    uri = export_policy_dir(art.export_root, info.step)
    names = storage.list_names(uri)
    missing = []
    if "config.json" not in names:
        missing.append("config.json")
    if not any(n.endswith(WEIGHT_SUFFIXES) for n in names):
        missing.append("weights (*.safetensors)")
    if not any(n in TOKENIZER_FILES for n in names):
        missing.append("tokenizer files")
    if missing:
        raise ExportError(f"the export at {uri} is not a portable HF model: missing {', '.join(missing)}")
    return ExportedPolicy(
        uri, info.step, doc.inputs.model.tokenizer_revision, art.checkpoint_root, art.terminal_manifest_uri
    )
