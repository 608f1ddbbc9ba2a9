"""Checkpoints under `trainer.ckpt_path` (a local path or an fsspec URL).

Layout::

    {ckpt_path}/global_step_<N>/            a complete TRL/HF Trainer checkpoint (model, tokenizer,
                                            optimizer.pt, scheduler.pt, rng_state*.pth,
                                            trainer_state.json) plus
    {ckpt_path}/global_step_<N>/rlaunch_checkpoint.json   {global_step, runtime_digest, written_at,
                                            files: {relative path: {size, sha256}}, ...}
    {ckpt_path}/latest                      text: N (written atomically, only once global_step_<N> is complete)

`rlaunch_checkpoint.json` is written last inside a checkpoint, and `latest` after it. Retention
keeps the newest `max_ckpts_to_keep` checkpoints (all when <= 0) and never removes the one
`latest` names.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from . import storage

INFO_FILE = "rlaunch_checkpoint.json"
LATEST_FILE = "latest"
_STEP_DIR = re.compile(r"^global_step_(\d+)$")


class ResumeRefused(RuntimeError):
    """A checkpoint exists but may not be resumed by this runtime (digest mismatch, damaged)."""


@dataclass(frozen=True)
class CheckpointStore:
    root: str

    def step_dir(self, step: int) -> str:
        return storage.join(self.root, f"global_step_{step}")

    def steps(self) -> list[int]:
        """Steps of complete checkpoints (those with their info file), ascending."""
        out = []
        for name in storage.list_names(self.root):
            match = _STEP_DIR.match(name)
            if match and storage.exists(storage.join(self.root, name, INFO_FILE)):
                out.append(int(match.group(1)))
        return sorted(out)

    def latest(self) -> int | None:
        marker = storage.join(self.root, LATEST_FILE)
        if not storage.exists(marker):
            return None
        text = storage.read_text(marker).strip()
        try:
            return int(text)
        except ValueError as exc:
            raise ResumeRefused(f"checkpoint marker {marker} holds {text!r}, not a step number") from exc

    def info(self, step: int) -> dict[str, Any]:
        location = storage.join(self.step_dir(step), INFO_FILE)
        if not storage.exists(location):
            raise ResumeRefused(
                f"{self.root}/latest names step {step} but {location} is missing: the checkpoint is incomplete"
            )
        return storage.read_json(location)

    def publish(self, local_dir: str, step: int, info: dict[str, Any]) -> str:
        """Copy a finished local Trainer checkpoint to `global_step_<step>/`, then move `latest`."""
        import os

        files = {  # what resume verifies before it continues this checkpoint (rlaunch.runs.resume)
            os.path.relpath(path, local_dir): {"size": os.path.getsize(path), "sha256": storage.sha256_file(path)}
            for directory, _, names in os.walk(local_dir)
            for path in (os.path.join(directory, name) for name in names)
            if os.path.relpath(path, local_dir) != INFO_FILE
        }
        storage.write_json_atomic(
            os.path.join(local_dir, INFO_FILE),
            {"global_step": step, "written_at": time.time(), **info, "files": files},
        )
        destination = self.step_dir(step)
        storage.publish_dir(local_dir, destination, last=[INFO_FILE])
        storage.write_bytes_atomic(storage.join(self.root, LATEST_FILE), f"{step}\n".encode())
        return destination

    def prune(self, keep: int) -> list[int]:
        """Remove all but the newest `keep` checkpoints up to `latest` (none when keep <= 0).

        Checkpoints past `latest` (left by another trajectory, e.g. before a `resume_mode: none`
        restart) are not this run's to judge and are left alone."""
        if keep <= 0:
            return []
        latest = self.latest()
        steps = [s for s in self.steps() if latest is None or s <= latest]
        doomed = steps[:-keep]
        for step in doomed:
            storage.remove_tree(self.step_dir(step))
        return doomed


def pinned(checkpoint_root: str, step: int, runtime_digest: str) -> CheckpointStore:
    """The store holding the pinned checkpoint (a run's `RLAUNCH_RESUME_FROM`), once it holds step
    `step` written under `runtime_digest` (ResumeRefused otherwise; a later step is not resumed)."""
    store = CheckpointStore(checkpoint_root)
    location = storage.join(store.step_dir(step), INFO_FILE)
    if not storage.exists(location):
        raise ResumeRefused(f"refusing to resume the pinned checkpoint {store.step_dir(step)}: {INFO_FILE} is missing")
    written = storage.read_json(location).get("runtime_digest")
    if written != runtime_digest:
        raise ResumeRefused(
            f"refusing to resume the pinned checkpoint {store.step_dir(step)}: it was written by runtime digest "
            f"{written or 'unknown'}, not the pinned {runtime_digest}"
        )
    return store


def check_digest(
    store: CheckpointStore,
    step: int,
    info: dict[str, Any],
    current: str,
    compatible: list[str],
    fingerprint: str = "",
) -> None:
    """Refuse a checkpoint written by another runtime source or under another run fingerprint (another
    recipe), unless declared compatible; the launch host refuses the same before submitting."""
    written_run = info.get("run_fingerprint")
    if fingerprint and written_run != fingerprint and written_run not in compatible:
        raise ResumeRefused(
            f"refusing to resume checkpoint {store.step_dir(step)}: it was written under run fingerprint "
            f"{written_run or 'unknown'}, but this run's is {fingerprint} (a changed recipe, plan or input). "
            "Use a fresh RL artifact version, or declare the checkpoint compatible in the spec: "
            f"compatible_checkpoint_digests=[{written_run!r}]."
        )
    written = info.get("runtime_digest")
    if not current:
        return
    if written == current or written in compatible:
        return
    raise ResumeRefused(
        f"refusing to resume checkpoint {store.step_dir(step)}: it was written by runtime digest {written!r}, "
        f"but this runtime's digest is {current!r} (compatible digests: {compatible or 'none declared'}). "
        "Use a fresh RL artifact version (its checkpoint root is new), or declare the checkpoint compatible "
        f"in the spec: compatible_checkpoint_digests=[{written!r}]."
    )
