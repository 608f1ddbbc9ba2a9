"""A hub source's pins in process, against a scripted `snapshot_download`: what it is asked for,
the commit a snapshot resolved to verified against the pin (a branch may move, a commit may not),
what is published (patterns, the hub's own cache left out), and each refusal word for word.
tests/sources/test_hub_source.py and tests/sources/test_pinned_data.py fetch from a real offline cache.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rlaunch.artifacts import resolve_version
from rlaunch.sources.hub import (
    HubError,
    UnpinnedRevisionError,
    _publish,
    _snapshot,
    fetch_dataset,
    fetch_model,
    hf_dataset_source,
    hf_model_source,
)
from rlaunch.sources.inputs import ArchitectureMismatchError

PIN, OTHER = "1" * 40, "2" * 40


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """snapshot_download answering with `hub["snapshot"]` (or raising `hub["error"]`); calls in `hub["calls"]`."""
    hf = pytest.importorskip("huggingface_hub")
    state: dict[str, Any] = {"calls": [], "snapshot": tmp_path / "snapshots" / PIN, "error": None}
    state["snapshot"].mkdir(parents=True)
    (state["snapshot"] / "config.json").write_text(json.dumps({"model_type": "qwen3", "num_attention_heads": 4}))

    def snapshot_download(repo_id: str, **kwargs: Any) -> str:
        state["calls"].append((repo_id, kwargs))
        if state["error"]:
            raise state["error"]
        return str(state["snapshot"]) + "/"

    monkeypatch.setattr(hf, "snapshot_download", snapshot_download)
    return state


@pytest.mark.parametrize("source", [hf_model_source, hf_dataset_source])
def test_a_malformed_repository_or_revision_is_refused_naming_the_field(source: Any) -> None:
    kind = source.__name__
    extra = {"files": ("train.parquet",)} if source is hf_dataset_source else {}
    for repo in ("bad repo", None):
        with pytest.raises(ValueError) as refused:
            source("m", repo, PIN, **extra)
        assert str(refused.value) == f"{kind} repo_id={repo!r} must be 'org/name' (a Hugging Face repository id)"
    for revision in ("  ", None):
        with pytest.raises(ValueError) as refused:
            source("m", "org/m", revision, **extra)
        assert str(refused.value) == f"{kind} revision={revision!r} must be a commit (40 hex characters)"
    with pytest.raises(UnpinnedRevisionError) as unpinned:
        source("m", "org/m", "main", version="2026.12.01", **extra)
    assert str(unpinned.value) == (
        "m@2026.12.01: revision='main' is a branch or tag, which can move under an immutable version; pin the "
        "40-hex commit it points to (the hub shows it), or use a dev version"
    )


def test_a_model_source_is_the_pinned_step_and_declares_its_config_only_when_given() -> None:
    step = hf_model_source("org-m", "org/m", PIN, version="2026.12.01")
    assert step.version == resolve_version("org-m", "2026.12.01") == "2026.12.01"
    ctx = SimpleNamespace(output_path="/out")
    assert step.build_config(ctx) == {  # type: ignore[arg-type]
        "repo_id": "org/m", "revision": PIN, "allow_patterns": [], "output_path": "/out",
    }  # fmt: skip
    declared = hf_model_source("org-m", "org/m", PIN, version="dev", config={"a": 1}, allow_patterns=("*.json",))
    assert declared.build_config(ctx)["config"] == {"a": 1}  # type: ignore[arg-type]
    with pytest.raises(TypeError) as refused:
        hf_model_source("org-m", "org/m", PIN, version="dev", config=[1])  # type: ignore[arg-type]
    assert str(refused.value) == "hf_model_source config must be the config.json as a dict, got list"


def test_the_snapshot_is_asked_for_the_pin_and_its_commit_verified(hub: dict[str, Any]) -> None:
    snapshot, commit = _snapshot("org/m", PIN, ["*.json"], "dataset")
    assert (snapshot, commit) == (str(hub["snapshot"]) + "/", PIN)
    assert hub["calls"] == [("org/m", {"repo_type": "dataset", "revision": PIN, "allow_patterns": ["*.json"]})]
    _snapshot("org/m", "main", [], "model")  # a branch: whatever commit it points to, recorded
    assert hub["calls"][-1] == ("org/m", {"repo_type": "model", "revision": "main", "allow_patterns": None})
    with pytest.raises(HubError) as moved:
        _snapshot("org/m", OTHER, [], "model")
    assert str(moved.value) == f"org/m@{OTHER} resolved to {PIN!r}, not the pinned commit {OTHER!r}"
    hub["snapshot"] = hub["snapshot"].parent / "main"
    hub["snapshot"].mkdir()
    with pytest.raises(HubError) as not_a_commit:
        _snapshot("org/m", "main", [], "model")
    assert str(not_a_commit.value) == "org/m@main resolved to 'main', not the pinned commit 'main'"


def test_a_fetch_the_hub_cannot_serve_names_the_fix(hub: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    hub["error"] = ValueError("no such revision")
    with pytest.raises(HubError) as refused:
        _snapshot("org/m", PIN, [], "model")
    assert str(refused.value) == (
        f"could not fetch org/m@{PIN} (a model): ValueError: no such revision. Check the repository and commit; "
        "offline (HF_HUB_OFFLINE=1) the commit must already be in the cache (HF_HUB_CACHE)"
    )
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(HubError) as missing:
        _snapshot("org/m", PIN, [], "dataset")
    assert str(missing.value) == "a hub dataset source step needs huggingface_hub: pip install 'rlaunch[hub]'"


def test_publishing_copies_what_matches_with_checksums_and_leaves_the_hubs_cache(tmp_path: Path) -> None:
    snapshot = tmp_path / "snap"
    for name, text in {"a.txt": "a", "b.json": "b", "c.json": "c", "sub/d.json": "d", ".cache/e.json": "e"}.items():
        (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / name).write_text(text)
    out = tmp_path / "out"
    files = _publish(str(snapshot), str(out), ["*.json"])
    sha = {t: hashlib.sha256(t.encode()).hexdigest() for t in "bcd"}
    assert files == {"b.json": sha["b"], "c.json": sha["c"], "sub/d.json": sha["d"]}
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == ["b.json", "c.json", "sub/d.json"]
    assert set(_publish(str(snapshot), str(tmp_path / "all"))) == {"a.txt", "b.json", "c.json", "sub/d.json"}


def test_a_fetched_model_passes_its_patterns_and_must_match_its_declared_config(
    hub: dict[str, Any], tmp_path: Path
) -> None:
    config = {"repo_id": "org/m", "revision": PIN, "allow_patterns": ["*.json"], "output_path": str(tmp_path / "o")}
    model = fetch_model(config)
    assert hub["calls"][-1] == ("org/m", {"repo_type": "model", "revision": PIN, "allow_patterns": ["*.json"]})
    assert (model.path, model.revision, model.num_attention_heads) == (str(tmp_path / "o"), PIN, 4)
    declared = {**config, "config": {"model_type": "qwen3", "num_attention_heads": 8}}
    with pytest.raises(ArchitectureMismatchError) as differs:
        fetch_model(declared).check_built(declared)  # the runner's check before it records the model
    assert str(differs.value) == (
        f"the config.json of the model built at {tmp_path / 'o'} describes another architecture than the config.json "
        "its step declares (num_attention_heads: declared 8, built 4): the dry run sized the launch by the "
        "declaration. Declare the architecture it has (FromConfig with its config.json), or build the model the "
        "declaration describes"
    )


def test_a_dataset_source_names_its_files_and_fetches_only_them(hub: dict[str, Any], tmp_path: Path) -> None:
    for files in ("train.parquet", (), ("train.parquet", " "), (1,)):
        with pytest.raises(ValueError) as refused:
            hf_dataset_source("d", "org/d", PIN, files=files, version="dev")  # type: ignore[arg-type]
        assert str(refused.value) == (
            f"hf_dataset_source files={files!r} must name the data files to stage, e.g. ('train.parquet',)"
        )
    config = {"repo_id": "org/d", "revision": PIN, "files": ["*.parquet"], "output_path": str(tmp_path / "o")}
    with pytest.raises(HubError) as absent:
        fetch_dataset(config)
    assert str(absent.value) == f"dataset org/d@{PIN} has no file matching ['*.parquet'] (it has [])"
    assert hub["calls"][-1] == ("org/d", {"repo_type": "dataset", "revision": PIN, "allow_patterns": ["*.parquet"]})


def test_a_version_is_required_outside_a_build_naming_the_step() -> None:
    with pytest.raises(ValueError, match="no version given for 'org-m'"):
        hf_model_source("org-m", "org/m", PIN)


def test_an_output_path_is_written_as_named_and_a_config_that_is_no_mapping_is_none(
    hub: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "modelX"  # a name ending in what a wider strip would take
    assert _publish(str(hub["snapshot"]), str(out)) and (out / "config.json").exists()
    (hub["snapshot"] / "config.json").write_text("[1]")
    model = fetch_model({"repo_id": "org/m", "revision": PIN, "allow_patterns": [], "output_path": str(out)})
    assert (model.hf_config, model.num_attention_heads) == (None, None)
