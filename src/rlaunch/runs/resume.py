"""Resume by identity: a checkpoint is resumed only by the run that wrote it.

Every checkpoint carries two digests: the runtime's source digest and the run fingerprint, a hash
of what decides what training computes (the recipe with the role plan rendered in, the
allocation's shape, the seed, the runtime profile and entrypoint, and the identities of the model
and data). A relaunch with `resume_mode: latest` resumes only when both equal this run's, or were
declared compatible (`SkyRLSpec(compatible_checkpoint_digests=...)` lists either kind). Otherwise
the plan says REFUSED with both values and `--run` submits nothing, and the host refuses too.

A run may instead start from an explicit checkpoint (`runtime.resume_from`: a root, a step and the
runtime digest it was written under, e.g. another version's). It keeps its own checkpoints under
a root of its own runtime (`pinned_checkpoint_root`), so a repin starts a fresh root and the old
checkpoints are never resumed by accident; while that root holds none, the pinned one is resumed,
exactly that step (not a later one), and only when its recorded digest is the pinned one.

Every checkpoint's `rlaunch_checkpoint.json` lists its files with their size and sha256 (written
as the checkpoint is written). Before a resume the host verifies the latest checkpoint against it
(`verified_resume`); a damaged one (a truncated weight file) is moved aside and the newest one that
verifies is resumed instead, saying so; with none good the launch is refused, naming each.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch import storage
from rlaunch.runs.layout import (
    CHECKPOINT_META,
    LATEST_MARKER,
    SKYRL_LATEST_MARKER,
    CheckpointInfo,
    checkpoint_dir,
    checkpoint_info,
    checkpoint_steps,
    latest_checkpoint,
)

FINGERPRINT_ENV = "RLAUNCH_RUN_FINGERPRINT"
RESUME_FROM_ENV = (
    "RLAUNCH_RESUME_FROM"  # the pinned checkpoint, for the runtime: JSON {checkpoint_root, step, runtime_digest}
)


def identity_view(document: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a launch document (plain data, as rendered) that decide what a checkpoint holds."""
    alloc, inputs = document["cluster"]["allocation"], document["inputs"]
    data = {
        kind: [{"identity": d["identity"], "relative_path": d.get("relative_path", "")} for d in inputs.get(kind, ())]
        for kind in ("train_data", "validation_data")
    }
    return {
        "skyrl": document["skyrl"],
        "seed": document["run"]["seed"],
        "runtime": {"profile": document["runtime"]["profile"], "entrypoint": document["runtime"]["entrypoint"]},
        "allocation": {k: alloc[k] for k in ("num_nodes", "gpus_per_node", "gpu_variant")},
        "model": {k: inputs["model"][k] for k in ("identity", "tokenizer_revision")},
        **data,
    }


def run_fingerprint(document: Mapping[str, Any]) -> str:
    """sha256 of the identity view, canonical JSON."""
    text = json.dumps(identity_view(document), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def foreign_checkpoint(
    checkpoint_root: str, digest: str, fingerprint: str, compatible: Iterable[str] = ()
) -> CheckpointInfo | None:
    """The latest checkpoint under `checkpoint_root` when another runtime or another run wrote it."""
    info = latest_checkpoint(checkpoint_root)
    return None if info is None or accepts(info, digest, fingerprint, compatible) else info


def accepts(info: CheckpointInfo, digest: str, fingerprint: str, compatible: Iterable[str] = ()) -> bool:
    """Whether a run of runtime `digest` and run `fingerprint` may resume `info` (the same run, or declared)."""
    accepted = (*compatible,)
    return info.runtime_digest in (digest, *accepted) and info.fingerprint in (fingerprint, *accepted)


def refusal(info: CheckpointInfo, digest: str, fingerprint: str) -> str:
    differs = []
    if info.fingerprint != fingerprint:
        differs.append(
            f"run fingerprint {info.fingerprint or 'unknown (written before fingerprints were recorded)'} "
            f"(this run: {fingerprint})"
        )
    if info.runtime_digest != digest:
        differs.append(f"runtime digest {(info.runtime_digest or 'unknown')[:16]} (this runtime: {digest[:16]})")
    # `accepts` needs both of the checkpoint's digests among this run's or the declared ones: declare
    # every one that differs, or following the advice is refused again.
    declare = tuple(
        d for d, ours in ((info.fingerprint, fingerprint), (info.runtime_digest, digest)) if d and d != ours
    )
    fresh = (
        f"resume_mode=latest would resume {info.path} (step {info.step}), written under "
        f"{' and '.join(differs)}. Use a fresh RL artifact version (the checkpoint root follows name and version)"
    )
    if not declare or len(declare) < len(differs):  # an unknown digest cannot be declared
        return f"{fresh}; it records no digest that could be declared compatible"
    return (
        f"{fresh}, or, once compatibility is established, declare it with "
        f"SkyRLSpec(compatible_checkpoint_digests={declare!r})"
    )


def resume_problem(
    info: CheckpointInfo | None,
    *,
    digest: str,
    fingerprint: str,
    compatible: Iterable[str],
    pin: tuple[str, int, str] | None,
    resume_mode: Any,
) -> str | None:
    """Why a launch must not start over the checkpoints it would resume (None: it may). `info` is the
    latest checkpoint of its own root; `pin` the checkpoint `runtime.resume_from` pins (root, step,
    runtime digest). One rule for the plan, `--run` and the host (`rlaunch.judgement.judge`'s resume gate)."""
    if resume_mode != "latest":
        if pin is not None:  # the pin would be ignored while the version gate trusted it
            return (
                "runtime.resume_from pins a checkpoint to start from, but trainer.resume_mode is not latest: "
                "set resume_mode: latest, or drop resume_from"
            )
        return None
    if info is not None:
        return None if accepts(info, digest, fingerprint, compatible) else refusal(info, digest, fingerprint)
    return None if pin is None else pinned_problem(*pin)


def pinned_checkpoint_root(checkpoint_root: str, digest: str) -> str:
    """Where a run that starts from a pinned checkpoint keeps its own: one root per runtime."""
    return f"{checkpoint_root.rstrip('/')}-{digest[:16]}"


def pinned_problem(checkpoint_root: str, step: int, digest: str) -> str | None:
    """Why the pinned checkpoint (`step` under `checkpoint_root`, written under runtime `digest`)
    cannot be resumed (None: it can). A later checkpoint beside it is not this pin's concern."""
    path = checkpoint_dir(checkpoint_root, step)
    meta = storage.read_json(storage.join(path, CHECKPOINT_META))
    if meta is None:
        return (
            f"resume_from pins step {step} under {checkpoint_root}, but {path} holds no finished checkpoint "
            f"({CHECKPOINT_META} is missing); pin a step that exists there"
        )
    written = meta.get("runtime_digest")
    if written != digest:
        return (
            f"resume_from pins {path} as written by runtime digest {digest}, but it was written by "
            f"{written or 'an unknown runtime'}; pin the digest its {CHECKPOINT_META} records once its "
            "compatibility with this runtime is established, or start over"
        )
    return None


@dataclass(frozen=True)
class ResumePoint:
    """The checkpoint a resume would continue (None: none verifies), and the newer ones that did not."""

    info: CheckpointInfo | None
    skipped: tuple[tuple[str, str], ...] = ()  # (checkpoint path, what failed its manifest), newest first

    def notes(self) -> list[str]:
        return [f"{path}: {problem}" for path, problem in self.skipped]


def checkpoint_problem(path: str) -> str | None:
    """What in the checkpoint at `path` fails its manifest; None when every file it lists has its size
    and sha256 (a checkpoint written before manifests lists none: nothing to check)."""
    files = (storage.read_json(storage.join(path, CHECKPOINT_META)) or {}).get("files")
    if not isinstance(files, dict):
        return None
    for name, expected in sorted(files.items()):
        url = storage.join(path, name)
        if not storage.exists(url):
            return f"{name} is missing"
        digest, size = storage.hashed(url)
        if size != expected.get("size"):
            return f"{name} has {size} bytes, its manifest says {expected.get('size')} (truncated or overwritten)"
        if digest != expected.get("sha256"):
            return f"{name} does not match its manifest's sha256 (damaged)"
    return None


def verified_resume(checkpoint_root: str) -> ResumePoint | None:
    """The newest checkpoint, at or below the latest marker, that verifies (None: no checkpoint)."""
    latest = latest_checkpoint(checkpoint_root)
    if latest is None:
        return None
    skipped: list[tuple[str, str]] = []
    for step in sorted((s for s in checkpoint_steps(checkpoint_root) if s <= latest.step), reverse=True):
        path = checkpoint_dir(checkpoint_root, step)
        if not storage.exists(storage.join(path, CHECKPOINT_META)):
            continue  # never completed: not a checkpoint a runtime resumes
        problem = checkpoint_problem(path)
        if problem is None:
            return ResumePoint(checkpoint_info(checkpoint_root, step), tuple(skipped))
        skipped.append((path, problem))
    return ResumePoint(None, tuple(skipped))


def fall_back(checkpoint_root: str, point: ResumePoint) -> None:
    """Move the damaged checkpoints aside (`damaged-global_step_<N>-<time>`, kept for a look) and point
    the latest markers at the checkpoint that verifies, so the runtime resumes that one."""
    assert point.info is not None
    stamp = time.strftime("%Y%m%dT%H%M%S")
    for path, _ in point.skipped:  # renamed out of `global_step_*`, which runtimes list and prune
        parent, name = path.rstrip("/").rsplit("/", 1)
        storage.rename(path, storage.join(parent, f"damaged-{name}-{stamp}"))
    for name in (LATEST_MARKER, SKYRL_LATEST_MARKER):
        marker = storage.join(checkpoint_root, name)
        if name == LATEST_MARKER or storage.exists(marker):
            storage.write_text_atomic(marker, f"{point.info.step}\n")
