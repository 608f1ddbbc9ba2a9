"""The model-source step for real against a local Hugging Face cache, offline (no network)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest

from rlaunch.artifacts import ArtifactStep, RunFailedError, Runner, records
from rlaunch.skyrl import ArtifactHfModel, HfModel, ModelFacts, PreflightError
from rlaunch.skyrl.plan.stored_facts import stored_model
from rlaunch.sources.hub import UnpinnedRevisionError, fetch_model, hf_model_source
from tests.support import specs as h
from tests.support.hub_cache import use_offline_hub_cache

pytestmark = pytest.mark.parity

REPO_ID = "tiny-org/tiny-qwen"
OLD, NEW = "1" * 40, "2" * 40


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A hub cache laid out as huggingface_hub writes it: two commits, `main` pointing at the newer."""
    cache = tmp_path / "hub"
    repo = cache / f"models--{REPO_ID.replace('/', '--')}"
    for commit, heads in ((OLD, 4), (NEW, 8)):
        snapshot = repo / "snapshots" / commit
        snapshot.mkdir(parents=True)
        (snapshot / "config.json").write_text(
            json.dumps({"model_type": "qwen3", "num_attention_heads": heads, "max_position_embeddings": 8192 * heads})
        )
        (snapshot / "tokenizer.json").write_text(json.dumps({"version": commit[:4]}))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(NEW)
    use_offline_hub_cache(cache, monkeypatch)
    monkeypatch.setenv("RLAUNCH_PREFIX", str(tmp_path / "prefix"))
    return repo


def _build(step, tmp_path: Path) -> dict:
    Runner(str(tmp_path / "prefix")).run([step])
    return records.read_record(step.path(str(tmp_path / "prefix")))


def test_pinned_commit_is_fetched_and_recorded_with_checksums(hub: Path, tmp_path: Path) -> None:
    step = hf_model_source("models/tiny", REPO_ID, OLD, version="2026.11.30")
    record = _build(step, tmp_path)
    result = record["result"]
    assert result["revision"] == OLD
    assert result["source"] == f"hf://{REPO_ID}"
    assert result["num_attention_heads"] == 4 and result["context_length"] == 32768
    snapshot = hub / "snapshots" / OLD
    expected = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in snapshot.iterdir()}
    assert result["files"] == expected
    published = Path(step.path(str(tmp_path / "prefix")))
    assert json.loads((published / "config.json").read_text())["num_attention_heads"] == 4


def test_a_branch_is_refused_for_a_calendar_version(hub: Path) -> None:
    with pytest.raises(UnpinnedRevisionError, match="revision='main' is a branch or tag"):
        hf_model_source("models/tiny", REPO_ID, "main", version="2026.11.30")


def test_a_dev_version_may_follow_a_branch_and_records_the_commit(hub: Path, tmp_path: Path) -> None:
    record = _build(hf_model_source("models/tiny", REPO_ID, "main", version="dev"), tmp_path)
    assert record["result"]["revision"] == NEW
    assert record["result"]["num_attention_heads"] == 8


def test_a_commit_missing_from_the_offline_cache_fails_with_the_fix(hub: Path, tmp_path: Path) -> None:
    step = hf_model_source("models/tiny", REPO_ID, "3" * 40, version="2026.11.30")
    with pytest.raises(RunFailedError) as caught:
        Runner(str(tmp_path / "prefix")).run([step])
    (outcome,) = caught.value.failed
    assert f"could not fetch {REPO_ID}@{'3' * 40}" in str(outcome.error)
    assert "HF_HUB_OFFLINE=1" in str(outcome.error)
    assert records.read_record(step.path(str(tmp_path / "prefix"))) is None


def test_a_disagreeing_tokenizer_revision_fails_the_preflight(hub: Path, tmp_path: Path) -> None:
    model = ArtifactStep(  # a model built elsewhere in the graph: it pins nothing, it records a commit
        name="models/tiny", version="2026.11.30", artifact_type=HfModel, run=fetch_model,
        build_config=lambda ctx: {"repo_id": REPO_ID, "revision": "main", "allow_patterns": [], "output_path": ctx.output_path},
    )  # fmt: skip
    unbuilt = h.spec(model=model)  # nothing recorded yet: nothing to disagree with
    _build(model, tmp_path)
    pinned = dataclasses.replace(unbuilt, model=ArtifactHfModel(model, tokenizer_revision=NEW))
    assert stored_model(pinned.model).facts.revision == NEW  # `main` resolved to NEW and was recorded
    with pytest.raises(PreflightError) as caught:
        h.planned(dataclasses.replace(unbuilt, model=ArtifactHfModel(model, tokenizer_revision=OLD)))
    mismatch = [v for v in caught.value.violations if v.code == "model.revision_mismatch"]
    assert len(mismatch) == 1
    assert mismatch[0].values == {"pinned": OLD, "recorded": NEW}


def test_a_tokenizer_revision_disagreeing_with_the_pinned_commit_fails_before_fetching(hub: Path) -> None:
    model = hf_model_source("models/tiny", REPO_ID, OLD, version="2026.11.30")
    agreeing = dataclasses.replace(h.spec(), model=ArtifactHfModel(model, tokenizer_revision=OLD))
    assert stored_model(agreeing.model).facts.revision == OLD
    with pytest.raises(PreflightError) as caught:
        h.planned(dataclasses.replace(agreeing, model=ArtifactHfModel(model, tokenizer_revision=NEW)))
    assert [v.values for v in caught.value.violations if v.code == "model.revision_mismatch"] == [
        {"pinned": NEW, "recorded": OLD}
    ]


def _sizable(hub: Path, commit: str) -> dict:
    """Rewrite a snapshot's config.json as a whole Qwen3 config (what the memory rules size)."""
    config = {**h.LLAMA_31_8B, "model_type": "qwen3", "head_dim": 128}
    (hub / "snapshots" / commit / "config.json").write_text(json.dumps(config))
    return config


def test_the_record_carries_the_config_and_the_plan_sizes_it(hub: Path, tmp_path: Path) -> None:
    config = _sizable(hub, OLD)
    step = hf_model_source("models/tiny", REPO_ID, OLD, version="2026.11.30")
    assert stored_model(ArtifactHfModel(step, tokenizer_revision=OLD)).facts.architecture is None  # nothing known yet
    record = _build(step, tmp_path)
    assert record["result"]["hf_config"] == config
    facts = stored_model(ArtifactHfModel(step, tokenizer_revision=OLD), str(tmp_path / "prefix")).facts
    assert facts.architecture == ModelFacts.from_hf_config(config).architecture
    assert facts.architecture.layers == 32 and facts.architecture.kv_heads == 8


def test_a_declared_config_sizes_the_plan_before_fetching_and_must_match(hub: Path, tmp_path: Path) -> None:
    config = _sizable(hub, OLD)
    step = hf_model_source("models/tiny", REPO_ID, OLD, version="2026.11.30", config=config)
    facts = stored_model(ArtifactHfModel(step, tokenizer_revision=OLD)).facts  # unbuilt: the declared config
    assert facts.architecture == ModelFacts.from_hf_config(config).architecture
    assert _build(step, tmp_path)["result"]["hf_config"] == config
    wrong = hf_model_source(
        "models/other", REPO_ID, OLD, version="2026.11.30", config={**config, "num_hidden_layers": 48}
    )
    with pytest.raises(RunFailedError) as caught:
        Runner(str(tmp_path / "prefix")).run([wrong])
    (outcome,) = caught.value.failed
    assert (
        "describes another architecture than the config.json its step declares (num_hidden_layers: declared 48, built 32)"
        in str(outcome.error)
    )
