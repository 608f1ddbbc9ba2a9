"""Resume safety: a checkpoint written by another runtime digest is never resumed silently."""

from __future__ import annotations

from collections.abc import Iterable

from rlaunch.launch_config.layout import CheckpointInfo, latest_checkpoint


def foreign_checkpoint(checkpoint_root: str, digest: str, compatible: Iterable[str] = ()) -> CheckpointInfo | None:
    """The latest checkpoint under `checkpoint_root` when another runtime digest wrote it."""
    info = latest_checkpoint(checkpoint_root)
    if info is None or info.runtime_digest in (digest, *compatible):
        return None
    return info


def refusal(info: CheckpointInfo, digest: str) -> str:
    return (
        f"resume_mode=latest would resume {info.path} (step {info.step}), written by runtime digest "
        f"{(info.runtime_digest or 'unknown')[:16]}, but this runtime's digest is {digest[:16]}. Use a fresh RL "
        "artifact version (the checkpoint root follows name and version), or, once compatibility is "
        "established, declare it with SkyRLSpec(compatible_checkpoint_digests=(...))"
    )
