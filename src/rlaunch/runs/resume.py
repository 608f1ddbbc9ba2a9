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
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from rlaunch import storage
from rlaunch.runs.layout import CHECKPOINT_META, CheckpointInfo, checkpoint_dir, latest_checkpoint

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
    declare = info.fingerprint if info.fingerprint and info.fingerprint != fingerprint else info.runtime_digest
    return (
        f"resume_mode=latest would resume {info.path} (step {info.step}), written under "
        f"{' and '.join(differs)}. Use a fresh RL artifact version (the checkpoint root follows name and "
        "version), or, once compatibility is established, declare it with "
        f"SkyRLSpec(compatible_checkpoint_digests=({declare!r},))"
    )


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
