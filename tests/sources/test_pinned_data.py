"""Gate 6, pinned data: a hub dataset is staged at a pinned commit (checksums, the commit verified
at staging), every data artifact records per split its rows and fields at build, and the
preflight refuses data whose rows lack a field the runtime reads, naming split, field and row.

`fixtures/prompts.parquet` was written by pyarrow 26 (the trl-cpu runtime's) from two rows with
the columns prompt, reward_spec, env_class: the footer reader is checked against a real writer."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from rlaunch import storage
from rlaunch.artifacts import ArtifactStep, RunFailedError, Runner, records
from rlaunch.skyrl import ArtifactDataSource, PreflightError, PromptData
from rlaunch.skyrl.plan import planning
from rlaunch.sources.hub import UnpinnedRevisionError, hf_dataset_source
from tests.support import specs as h
from tests.support.hub_cache import use_offline_hub_cache

REPO_ID = "tiny-org/prompts"
PINNED, OTHER = "4" * 40, "5" * 40
FIXTURE = Path(__file__).parent / "fixtures" / "prompts.parquet"
ROWS = [
    {"prompt": [{"role": "user", "content": "1 + 1?"}], "reward_spec": {"ground_truth": "2"}},
    {"prompt": [{"role": "user", "content": "2 + 2?"}], "reward_spec": {"ground_truth": "4"}},
]


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A dataset repository in a hub cache, as huggingface_hub lays it out, with `main` at PINNED."""
    cache = tmp_path / "hub"
    repo = cache / f"datasets--{REPO_ID.replace('/', '--')}"
    snapshot = repo / "snapshots" / PINNED
    (snapshot / "data").mkdir(parents=True)
    (snapshot / "data" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    shutil.copy(FIXTURE, snapshot / "data" / "test.parquet")
    (snapshot / "README.md").write_text("not staged")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(PINNED)
    use_offline_hub_cache(cache, monkeypatch)
    return snapshot


def test_a_pinned_dataset_is_staged_from_the_hub_cache_with_checksums_and_split_facts(hub: Path, prefix: str) -> None:
    step = hf_dataset_source(
        "data/prompts", REPO_ID, PINNED, files=("data/*.jsonl", "data/test.parquet"), version="2026.11.30"
    )
    Runner(prefix, report=lambda line: None).run([step])
    result = records.read_record(step.path(prefix))["result"]
    assert result["revision"] == PINNED and result["source"] == f"hf://datasets/{REPO_ID}"
    expected = {f"data/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest() for p in (hub / "data").iterdir()}
    assert result["files"] == expected  # README.md was not asked for
    assert result["splits"] == {
        "data/test.parquet": {"rows": 2, "fields": ["prompt", "reward_spec", "env_class"], "first_missing": {}},
        "data/train.jsonl": {"rows": 2, "fields": ["prompt", "reward_spec"], "first_missing": {}},
    }
    staged = Path(step.path(prefix)) / "data" / "train.jsonl"
    assert staged.read_text() == (hub / "data" / "train.jsonl").read_text()


def test_a_wrong_revision_is_refused(hub: Path, prefix: str) -> None:
    with pytest.raises(UnpinnedRevisionError, match="revision='main' is a branch or tag"):
        hf_dataset_source("data/prompts", REPO_ID, "main", files=("data/train.jsonl",), version="2026.11.30")
    missing = hf_dataset_source("data/prompts", REPO_ID, OTHER, files=("data/train.jsonl",), version="2026.11.30")
    with pytest.raises(RunFailedError) as caught:
        Runner(prefix, report=lambda line: None).run([missing])
    assert f"could not fetch {REPO_ID}@{OTHER} (a dataset)" in caught.value.failed[0].error
    assert records.read_record(missing.path(prefix)) is None
    absent = hf_dataset_source("data/prompts", REPO_ID, PINNED, files=("data/valid.jsonl",), version="2026.11.30")
    with pytest.raises(RunFailedError) as caught:
        Runner(prefix, report=lambda line: None).run([absent])
    assert "has no file matching ['data/valid.jsonl']" in caught.value.failed[0].error


def _rows_step(rows: list[dict], name: str = "data/arith") -> ArtifactStep[PromptData]:
    def build(config: dict) -> PromptData:
        text = "".join(json.dumps(r) + "\n" for r in rows)
        storage.write_text_atomic(storage.join(config["output_path"], "train.jsonl"), text)
        return PromptData(path=config["output_path"])

    return ArtifactStep(
        name=name, version="2026.11.30", artifact_type=PromptData, run=build,
        build_config=lambda ctx: {"output_path": ctx.output_path, "rows": rows},
    )  # fmt: skip


def test_a_dataset_missing_a_field_the_runtime_reads_is_refused_at_plan_time(hub: Path, prefix: str) -> None:
    rows = [*ROWS, {"prompt": [{"role": "user", "content": "3 + 3?"}], "answer": "6"}, *ROWS]
    data = _rows_step(rows)
    Runner(prefix, report=lambda line: None).run([data])
    recorded = records.read_record(data.path(prefix))["result"]["splits"]["train.jsonl"]
    assert recorded == {
        "rows": 5,
        "fields": ["prompt", "reward_spec", "answer"],
        "first_missing": {"reward_spec": 2, "answer": 0},
    }
    with pytest.raises(PreflightError) as caught:
        h.planned(h.spec(train_data=(ArtifactDataSource(data, "train.jsonl"),), validation_data=()))
    (violation,) = [v for v in caught.value.violations if v.code == "data.missing_field"]
    assert violation.values == {"split": "train.jsonl", "field": "reward_spec", "row": 2}
    assert "train_data[0] data/arith@2026.11.30 split 'train.jsonl': row 2 has no field 'reward_spec'" in str(violation)
    assert "runtime fsdp reads" in str(violation)


def test_the_rl_step_checks_data_built_in_the_same_run_before_the_host_allocates(hub: Path, prefix: str) -> None:
    data = _rows_step([{"question": "1 + 1?"}], name="data/raw")
    spec = h.spec(train_data=(ArtifactDataSource(data, "train.jsonl"),), validation_data=())  # not built: not judged
    Runner(prefix, report=lambda line: None).run([data])
    with pytest.raises(PreflightError, match="row 0 has no field 'prompt'"):
        planning.check(spec, h.iris(), planning.stored_facts(spec, prefix))
