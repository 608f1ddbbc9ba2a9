"""A Hugging Face model or dataset brought into the graph at a pinned commit.

`hf_model_source(name, repo_id, revision)` is an artifact step that fetches the repository with
`huggingface_hub.snapshot_download` at `revision`, copies the files to the artifact's output path
and records the resolved commit and each file's sha256 (plus the architecture facts the preflight
checks, from `config.json`: attention heads, context length, and the config itself, which sizes
the memory rules). `config=` declares the config.json at the pinned commit before anything is
fetched, so a dry run can size the plan; the step fails on a snapshot whose config differs. A calendar (immutable) version
must pin a 40-hex commit: a branch or tag moves, so the same identity could later mean other
weights. A `dev` version may follow a branch; the commit it resolved to is still recorded.
`hf_dataset_source(name, repo_id, revision, files=...)` does the same for a dataset repository:
the named files (or patterns) at the pinned commit, each file's sha256, and the commit verified
at staging; as a `PromptData` it records per split its row count and fields.
huggingface_hub is imported only when the step runs (`pip install 'rlaunch[hub]'`); the hub's own
settings apply (`HF_HUB_CACHE`, `HF_HUB_OFFLINE`, `HF_TOKEN`).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import ArtifactStep, is_mutable, resolve_version
from rlaunch.errors import UserError
from rlaunch.sources.inputs import COMMIT, HfModel, PromptData

_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


class UnpinnedRevisionError(UserError, ValueError):
    """A calendar version names a branch or tag instead of a commit."""


class HubError(UserError, RuntimeError):
    """The hub could not provide the pinned revision (missing package, offline cache miss, wrong commit)."""


def _pinned_version(kind: str, name: str, repo_id: str, revision: str, version: str | None) -> str:
    """The step's version, after refusing a malformed repository or an unpinned calendar version."""
    if not isinstance(repo_id, str) or not _REPO.match(repo_id):
        raise ValueError(f"{kind} repo_id={repo_id!r} must be 'org/name' (a Hugging Face repository id)")
    if not isinstance(revision, str) or not revision.strip():
        raise ValueError(f"{kind} revision={revision!r} must be a commit (40 hex characters)")
    resolved_version = resolve_version(name, version)
    if not is_mutable(resolved_version) and not COMMIT.match(revision):
        raise UnpinnedRevisionError(
            f"{name}@{resolved_version}: revision={revision!r} is a branch or tag, which can move under an immutable "
            f"version; pin the 40-hex commit it points to (the hub shows it), or use a dev version"
        )
    return resolved_version


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
    resolved_version = _pinned_version("hf_model_source", name, repo_id, revision, version)
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


def hf_dataset_source(
    name: str, repo_id: str, revision: str, *, files: tuple[str, ...], version: str | None = None
) -> ArtifactStep[PromptData]:
    """The dataset repository `repo_id` at `revision`: the `files` (paths or glob patterns, e.g.
    `("train.parquet", "test.parquet")`) as the artifact `name@version`, one split per file."""
    resolved_version = _pinned_version("hf_dataset_source", name, repo_id, revision, version)
    if isinstance(files, str) or not files or not all(isinstance(f, str) and f.strip() for f in files):
        raise ValueError(
            f"hf_dataset_source files={files!r} must name the data files to stage, e.g. ('train.parquet',)"
        )
    return ArtifactStep(
        name=name,
        version=resolved_version,
        artifact_type=PromptData,
        run=fetch_dataset,
        build_config=lambda ctx: {
            "repo_id": repo_id,
            "revision": revision,
            "files": list(files),
            "output_path": ctx.output_path,
        },
    )


def _snapshot(repo_id: str, revision: str, patterns: list[str], repo_type: str) -> tuple[str, str]:
    """(local snapshot directory, commit) of `repo_id` at `revision`, the commit verified."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise HubError(f"a hub {repo_type} source step needs huggingface_hub: pip install 'rlaunch[hub]'") from exc
    try:
        snapshot = snapshot_download(repo_id, repo_type=repo_type, revision=revision, allow_patterns=patterns or None)
    except Exception as exc:  # the hub's errors differ by version; all mean "this revision is not available"
        raise HubError(
            f"could not fetch {repo_id}@{revision} (a {repo_type}): {type(exc).__name__}: {exc}. Check the repository "
            "and commit; offline (HF_HUB_OFFLINE=1) the commit must already be in the cache (HF_HUB_CACHE)"
        ) from exc
    commit = os.path.basename(os.path.normpath(snapshot))
    if not COMMIT.match(commit) or (COMMIT.match(revision) and commit != revision):
        raise HubError(f"{repo_id}@{revision} resolved to {commit!r}, not the pinned commit {revision!r}")
    return snapshot, commit


def fetch_dataset(config: dict[str, Any]) -> PromptData:
    """Download the pinned files, verify the commit, publish them with their checksums and split facts."""
    repo_id, revision = config["repo_id"], config["revision"]
    snapshot, commit = _snapshot(repo_id, revision, config["files"], "dataset")
    files = _publish(snapshot, config["output_path"], config["files"])
    absent = [p for p in config["files"] if not any(fnmatch.fnmatch(f, p) for f in files)]
    if absent:
        raise HubError(f"dataset {repo_id}@{commit} has no file matching {absent} (it has {sorted(files)})")
    return PromptData(path=config["output_path"], files=files, revision=commit, source=f"hf://datasets/{repo_id}")


def fetch_model(config: dict[str, Any]) -> HfModel:
    """Download the snapshot, verify the commit, publish the files with their checksums (a `config=`
    the step declares is checked against the published config.json by `HfModel.check_built`)."""
    repo_id = config["repo_id"]
    snapshot, commit = _snapshot(repo_id, config["revision"], config["allow_patterns"], "model")
    arch = _architecture(snapshot)
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


def _publish(snapshot: str, output_path: str, patterns: list[str] | None = None) -> dict[str, str]:
    """Copy every file of the snapshot (those matching `patterns`, when given: an offline snapshot
    holds whatever was fetched before) under `output_path` (streamed); {relative path: sha256}.

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
            if patterns and not any(fnmatch.fnmatch(relative, p) for p in patterns):
                continue
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
