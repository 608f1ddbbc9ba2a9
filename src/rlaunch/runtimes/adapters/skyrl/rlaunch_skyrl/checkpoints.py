"""The runtime digest beside SkyRL's checkpoints, so a resume across a runtime change is refused.

SkyRL writes `global_step_<N>/` and `latest_ckpt_global_step.txt` under `trainer.ckpt_path`. This
adapter records the runtime digest at the checkpoint root before training, refuses to resume a
root another digest wrote (unless declared compatible), and afterwards adds rlaunch's `latest`
marker and a `rlaunch_checkpoint.json` to every checkpoint, which rlaunch's host and `status` read.

A run pinned to another checkpoint (`RLAUNCH_RESUME_FROM`: root, step, runtime digest) starts from
exactly that step, through SkyRL's own `resume_mode: from_path`, while its own root holds none;
the pinned checkpoint's recorded digest must be the pinned one (`pinned_resume_path`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Mapping
from typing import Any

import fsspec

SKYRL_LATEST = "latest_ckpt_global_step.txt"
RESUME_FROM_ENV = "RLAUNCH_RESUME_FROM"
RUNTIME_FILE = "rlaunch_runtime.json"
META = "rlaunch_checkpoint.json"
_STEP = re.compile(r"^global_step_(\d+)$")


class ForeignCheckpointError(RuntimeError):
    pass


def _fs(url: str) -> tuple[Any, str]:
    return fsspec.core.url_to_fs(url)


def _read(fs: Any, path: str) -> str | None:
    try:
        return fs.cat_file(path).decode("utf-8")
    except FileNotFoundError:
        return None


def guard(ckpt_root: str, resume_mode: str | None, digest: str, compatible: list[str], fingerprint: str = "") -> None:
    """Refuse to resume checkpoints another runtime wrote, or another run (fingerprint); then claim the root."""
    fs, root = _fs(ckpt_root)
    recorded = _read(fs, f"{root}/{RUNTIME_FILE}")
    previous = json.loads(recorded)["runtime_digest"] if recorded else None
    previous_run = json.loads(recorded).get("run_fingerprint") if recorded else None
    has_checkpoint = _read(fs, f"{root}/{SKYRL_LATEST}") is not None
    if (
        resume_mode == "latest"
        and has_checkpoint
        and fingerprint
        and previous_run not in (None, "", fingerprint, *compatible)
    ):
        raise ForeignCheckpointError(
            f"{ckpt_root} holds checkpoints written under run fingerprint {previous_run[:16]}, but this run is "
            f"{fingerprint[:16]} (a changed recipe, plan or input); use a fresh RL artifact version, or declare "
            "the checkpoint compatible in the spec (compatible_checkpoint_digests)"
        )
    if resume_mode == "latest" and has_checkpoint and previous not in (None, digest, *compatible):
        raise ForeignCheckpointError(
            f"{ckpt_root} holds checkpoints written by runtime digest {previous[:16]}, but this runtime is "
            f"{digest[:16]}; use a fresh RL artifact version, or declare the checkpoint compatible in the spec "
            "(compatible_checkpoint_digests)"
        )
    fs.makedirs(root, exist_ok=True)
    claim = {"runtime_digest": digest, "run_fingerprint": fingerprint, "written_at": time.time()}
    fs.pipe_file(f"{root}/{RUNTIME_FILE}", json.dumps(claim).encode())


def pinned_resume_path(checkpoint_root: str, step: int, runtime_digest: str) -> str:
    """SkyRL's `resume_path` for the pinned checkpoint, once it holds step `step` written under
    `runtime_digest` (ForeignCheckpointError otherwise; a later step beside it is not resumed)."""
    fs, root = _fs(checkpoint_root)
    path = f"{checkpoint_root.rstrip('/')}/global_step_{step}"
    recorded = _read(fs, f"{root}/global_step_{step}/{META}")
    if recorded is None:
        raise ForeignCheckpointError(f"the pinned checkpoint {path} is missing ({META} not found)")
    written = json.loads(recorded).get("runtime_digest")
    if written != runtime_digest:
        raise ForeignCheckpointError(
            f"the pinned checkpoint {path} was written by runtime digest {written or 'unknown'}, not the pinned "
            f"{runtime_digest}"
        )
    return path


def start_from_pin(document: Mapping[str, Any], pin: str) -> dict[str, Any]:
    """The document with SkyRL told to resume the pinned checkpoint (`pin`: RLAUNCH_RESUME_FROM),
    when the run's own root holds no checkpoint and it resumes at all; else the document as is."""
    trainer = document["skyrl"]["trainer"]
    fs, root = _fs(trainer["ckpt_path"])
    if not pin or trainer.get("resume_mode") != "latest" or _read(fs, f"{root}/{SKYRL_LATEST}") is not None:
        return dict(document)
    pinned = json.loads(pin)
    path = pinned_resume_path(pinned["checkpoint_root"], int(pinned["step"]), pinned["runtime_digest"])
    skyrl = {**document["skyrl"], "trainer": {**trainer, "resume_mode": "from_path", "resume_path": path}}
    return {**document, "skyrl": skyrl}


def mirror(ckpt_root: str, digest: str, fingerprint: str = "") -> int | None:
    """Describe SkyRL's checkpoints in rlaunch's layout; returns the latest step (None if none)."""
    fs, root = _fs(ckpt_root)
    latest = _read(fs, f"{root}/{SKYRL_LATEST}")
    if latest is None:
        return None
    step = int(latest.strip())
    names = [os.path.basename(p.rstrip("/")) for p in fs.ls(root, detail=False)]
    for name in names:
        match = _STEP.match(name)
        # only checkpoints SkyRL committed (at or below its marker): a newer directory may be half-written
        if match and int(match.group(1)) <= step and not fs.exists(f"{root}/{name}/{META}"):
            meta = {
                "global_step": int(match.group(1)),
                "runtime_digest": digest,
                "run_fingerprint": fingerprint,
                "written_at": time.time(),
                "files": _manifest(fs, f"{root}/{name}"),
            }
            fs.pipe_file(f"{root}/{name}/{META}", json.dumps(meta).encode())
    fs.pipe_file(f"{root}/latest", str(step).encode())
    return step


def _manifest(fs: Any, directory: str) -> dict[str, dict[str, Any]]:
    """Each file of a checkpoint with its size and sha256: what rlaunch verifies before resuming it."""
    files = {}
    for path in sorted(fs.find(directory)):
        digest = hashlib.sha256()
        with fs.open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        files[path[len(directory) :].lstrip("/")] = {"size": fs.size(path), "sha256": digest.hexdigest()}
    return files


def resume_settings(skyrl: Mapping[str, Any]) -> tuple[str, str | None]:
    trainer = skyrl["trainer"]
    return trainer["ckpt_path"], trainer.get("resume_mode")
