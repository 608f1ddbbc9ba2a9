"""A step job's entrypoint in process (`task.step_entry`): every input is checked against the identity
the coordinator planned with, referenced by the config or not; each place the config points into an
input is staged under the identity of the innermost input holding it; and the task's directory is
removed when the job ends unless `RLAUNCH_KEEP_TASK_DIR=1` keeps it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from rlaunch import storage
from rlaunch.task import bootstrap, step_entry
from rlaunch.task.staging import MANIFEST, StagingError

from .conftest import make_artifact

FP = "f" * 64
OTHER_FP = "0" * 64
SEEN: list[Any] = []  # what `train` was given, for the test that ran it


def train(config: dict[str, Any]) -> None:
    """The step's function: notes the config and that its staged model is there while it runs."""
    SEEN.append((config, os.path.isfile(config["model"])))


def train_and_fail(config: dict[str, Any]) -> None:
    train(config)
    raise RuntimeError("CUDA out of memory")


def _staged(inputs: list[dict[str, str]], config: Any, root: Path) -> Any:
    return step_entry.staged_config(inputs, config, str(root), lambda _: None)


def test_a_substituted_input_the_config_does_not_point_into_is_refused(tmp_path: Path) -> None:
    model, model_id = make_artifact(tmp_path / "model", {"config.json": b"{}"})
    data, planned = make_artifact(tmp_path / "data", {"train.jsonl": b"{}\n"}, name="data/gsm8k", fingerprint=OTHER_FP)
    make_artifact(tmp_path / "data", {"train.jsonl": b"{}\n"}, name="data/gsm8k")  # rebuilt since it was planned
    inputs = [{"uri": model, "identity": model_id}, {"uri": data, "identity": planned}]
    with pytest.raises(StagingError, match=rf"^{data} holds data/gsm8k@2026.12.01:ffffffffffff but the launch "):
        _staged(inputs, {"model": f"{model}/config.json"}, tmp_path / "task")
    assert not (tmp_path / "task").exists()  # refused before anything was staged


def test_an_input_whose_fingerprint_differs_in_its_last_character_is_refused_before_anything_is_staged(
    tmp_path: Path,
) -> None:
    """The message prints 12 characters of the fingerprint; the compare reads all 64."""
    model, model_id = make_artifact(tmp_path / "model", {"config.json": b"{}"})
    data, _ = make_artifact(tmp_path / "data", {"train.jsonl": b"{}\n"}, name="data/gsm8k", fingerprint=FP[:63] + "0")
    inputs = [{"uri": model, "identity": model_id}, {"uri": data, "identity": f"data/gsm8k@2026.12.01:{FP}"}]
    with pytest.raises(StagingError, match="the input changed since the document was rendered"):
        _staged(inputs, {"model": f"{model}/config.json"}, tmp_path / "task")
    assert not (tmp_path / "task").exists()


def test_an_input_inside_another_is_staged_under_its_own_identity(tmp_path: Path) -> None:
    outer, outer_id = make_artifact(tmp_path / "run", {"train.jsonl": b"{}\n"}, name="data/mix")
    inner, inner_id = make_artifact(
        tmp_path / "run" / "export", {"model.bin": b"w"}, name="models/policy", fingerprint=OTHER_FP
    )
    inputs = [{"uri": outer, "identity": outer_id}, {"uri": inner, "identity": inner_id}]  # the outer first
    staged = _staged(inputs, {"model": f"{inner}/model.bin", "data": f"{outer}/train.jsonl"}, tmp_path / "task")
    model, data = Path(staged["model"]), Path(staged["data"])
    assert model.read_bytes() == b"w" and data.read_bytes() == b"{}\n"
    assert json.loads((model.parent / MANIFEST).read_text())["identity"] == inner_id
    assert json.loads((data.parent / MANIFEST).read_text())["identity"] == outer_id


def _job(tmp_path: Path, model: str, model_id: str, function: str = "train") -> str:
    url = str(tmp_path / "step-job.json")
    storage.write_json_atomic(
        url,
        {
            "run_id": "models/sft@1",
            "attempt_id": "a1",
            "identity": "models/sft@1",
            "function": f"{__name__}:{function}",
            "inputs": [{"uri": model, "identity": model_id}],
            "config": {"model": f"{model}/config.json"},
            "result_uri": str(tmp_path / "result.json"),
            "runtime": None,
        },
    )
    return url


@pytest.mark.parametrize(("keep", "kept"), [(None, False), ("1", True)])
def test_the_task_directory_is_removed_unless_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep: str | None, kept: bool
) -> None:
    if keep is not None:
        monkeypatch.setenv(bootstrap.KEEP_ENV, keep)
    SEEN.clear()
    step_entry.main(["--job", _job(tmp_path, *make_artifact(tmp_path / "model", {"config.json": b"{}"}))])
    ((config, staged_while_running),) = SEEN
    task_dir = tmp_path / "staging" / "models-sft-1" / "a1" / "replica-0"
    assert staged_while_running and config["model"].startswith(f"{task_dir}/")
    assert task_dir.exists() is kept
    assert storage.read_json(str(tmp_path / "result.json")) == {"values": {}}


def test_the_task_directory_of_a_step_that_failed_is_removed(tmp_path: Path) -> None:
    SEEN.clear()
    model = make_artifact(tmp_path / "model", {"config.json": b"{}"})
    with pytest.raises(RuntimeError, match="CUDA out of memory"):
        step_entry.main(["--job", _job(tmp_path, *model, function="train_and_fail")])
    assert [staged for _, staged in SEEN] == [True]
    assert not (tmp_path / "staging" / "models-sft-1" / "a1" / "replica-0").exists()
