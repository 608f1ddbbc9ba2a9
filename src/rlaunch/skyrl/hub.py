"""A Hugging Face model brought into the graph at a pinned commit.

`hf_model_source(name, repo_id, revision)` is an artifact step that fetches the repository with
`huggingface_hub.snapshot_download` at `revision`, copies the files to the artifact's output path
and records the resolved commit and each file's sha256 (plus the architecture facts the preflight
checks, from `config.json`: attention heads, context length, and the config itself, which sizes
the memory rules). `config=` declares the config.json at the pinned commit before anything is
fetched, so a dry run can size the plan; the fetch refuses a snapshot whose config differs. A calendar (immutable) version
must pin a 40-hex commit: a branch or tag moves, so the same identity could later mean other
weights. A `dev` version may follow a branch; the commit it resolved to is still recorded.
huggingface_hub is imported only when the step runs (`pip install 'rlaunch[hub]'`); the hub's own
settings apply (`HF_HUB_CACHE`, `HF_HUB_OFFLINE`, `HF_TOKEN`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import ArtifactStep, is_mutable, resolve_version
from rlaunch.errors import UserError
from rlaunch.skyrl.model_facts import ModelFacts
from rlaunch.skyrl.sources import COMMIT, HfModel

_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


class UnpinnedRevisionError(UserError, ValueError):
    """A calendar version names a branch or tag instead of a commit."""


class HubError(UserError, RuntimeError):
    """The hub could not provide the pinned revision (missing package, offline cache miss, wrong commit)."""


def hf_model_source(
    name: str,
    repo_id: str,
    revision: str,
    *,
    version: str | None = None,
    allow_patterns: tuple[str, ...] = (),
    config: dict[str, Any] | None = None,
) -> ArtifactStep[HfModel]:
    """The model `repo_id` at `revision` as the artifact `name@version` (`config`: its config.json there)."""
    if config is not None and not isinstance(config, dict):
        raise TypeError(f"hf_model_source config must be the config.json as a dict, got {type(config).__name__}")
    if not isinstance(repo_id, str) or not _REPO.match(repo_id):
        raise ValueError(f"hf_model_source repo_id={repo_id!r} must be 'org/name' (a Hugging Face repository id)")
    if not isinstance(revision, str) or not revision.strip():
        raise ValueError(f"hf_model_source revision={revision!r} must be a commit (40 hex characters)")
    resolved_version = resolve_version(name, version)
    if not is_mutable(resolved_version) and not COMMIT.match(revision):
        raise UnpinnedRevisionError(
            f"{name}@{resolved_version}: revision={revision!r} is a branch or tag, which can move under an immutable "
            f"version; pin the 40-hex commit it points to (the hub shows it), or use a dev version"
        )
    return ArtifactStep(
        name=name,
        version=resolved_version,
        artifact_type=HfModel,
        run=fetch_model,
        build_config=lambda ctx: {
            "repo_id": repo_id,
            "revision": revision,
            "allow_patterns": list(allow_patterns),
            "output_path": ctx.output_path,
            **({"config": config} if config is not None else {}),
        },
    )


def fetch_model(config: dict[str, Any]) -> HfModel:
    """Download the snapshot, verify the commit, publish the files with their checksums."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise HubError("a hf_model_source step needs huggingface_hub: pip install 'rlaunch[hub]'") from exc
    repo_id, revision = config["repo_id"], config["revision"]
    try:
        snapshot = snapshot_download(repo_id, revision=revision, allow_patterns=config["allow_patterns"] or None)
    except Exception as exc:  # the hub's errors differ by version; all mean "this revision is not available"
        raise HubError(
            f"could not fetch {repo_id}@{revision}: {type(exc).__name__}: {exc}. Check the repository and commit; "
            "offline (HF_HUB_OFFLINE=1) the commit must already be in the cache (HF_HUB_CACHE)"
        ) from exc
    commit = os.path.basename(os.path.normpath(snapshot))
    if not COMMIT.match(commit) or (COMMIT.match(revision) and commit != revision):
        raise HubError(f"{repo_id}@{revision} resolved to {commit!r}, not the pinned commit {revision!r}")
    arch = _architecture(snapshot)
    declared = config.get("config")
    if declared is not None and ModelFacts.from_hf_config(declared) != ModelFacts.from_hf_config(arch):
        raise HubError(
            f"{repo_id}@{commit}: its config.json describes another architecture than the config= the step declares; "
            "copy the config.json at that commit into the step"
        )
    files = _publish(snapshot, config["output_path"])
    return HfModel(
        path=config["output_path"],
        num_attention_heads=arch.get("num_attention_heads"),
        context_length=arch.get("max_position_embeddings"),
        files=files,
        revision=commit,
        source=f"hf://{repo_id}",
        hf_config=arch or None,
    )


def _publish(snapshot: str, output_path: str) -> dict[str, str]:
    """Copy every file of the snapshot under `output_path` (streamed); {relative path: sha256}.

    The artifact is not visible until the runner writes its record, so a half-copied output is
    never served.
    """
    fs, root = storage.filesystem(output_path)
    files: dict[str, str] = {}
    for directory, dirs, names in os.walk(snapshot):
        dirs[:] = sorted(d for d in dirs if d != ".cache")
        for filename in sorted(names):
            local = os.path.join(directory, filename)
            relative = os.path.relpath(local, snapshot).replace(os.sep, "/")
            digest = hashlib.sha256()
            with open(local, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
            files[relative] = digest.hexdigest()
            target = f"{root.rstrip('/')}/{relative}"
            fs.makedirs(os.path.dirname(target), exist_ok=True)
            fs.put_file(local, target)
    return files


def _architecture(snapshot: str) -> dict[str, Any]:
    path = os.path.join(snapshot, "config.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    return config if isinstance(config, dict) else {}
