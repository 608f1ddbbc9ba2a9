"""Where a run's files live: temporary state under a TTL root from name and version, durable
outputs under the artifact path."""

from __future__ import annotations

import pytest

from rlaunch import storage
from rlaunch.runs import layout
from rlaunch.runs.layout import RunPaths, temporary_root
from tests.support.documents import DAY, NAME, rendered_document, rl_step


def test_rendered_document_paths(prefix: str) -> None:
    artifacts = rendered_document(prefix)["artifacts"]
    durable = f"{prefix}/{NAME}/{DAY}"
    temporary = f"{prefix}/.tmp/ttl=14d/{NAME}/{DAY}"
    assert artifacts == {
        "output_path": durable,
        "checkpoint_root": f"{temporary}/checkpoints",
        "attempts_root": f"{temporary}/attempts",
        "export_root": f"{durable}/exports",
        "resolved_config_uri": f"{durable}/resolved-launch.yaml",
        "terminal_manifest_uri": f"{durable}/terminal.json",
        "resume_checkpoint_count": 3,
        "temporary_storage_ttl_days": 14,
    }


def test_temporary_root_follows_the_ttl(prefix: str) -> None:
    artifacts = rendered_document(prefix, ttl_days=3)["artifacts"]
    assert artifacts["checkpoint_root"] == f"{prefix}/.tmp/ttl=3d/{NAME}/{DAY}/checkpoints"
    assert artifacts["export_root"] == f"{prefix}/{NAME}/{DAY}/exports"


def test_temporary_prefix_can_live_elsewhere(prefix: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    scratch = str(tmp_path / "scratch")
    monkeypatch.setenv(layout.TEMP_PREFIX_ENV, scratch)
    artifacts = rendered_document(prefix)["artifacts"]
    assert artifacts["checkpoint_root"] == f"{scratch}/ttl=14d/{NAME}/{DAY}/checkpoints"
    assert artifacts["attempts_root"] == f"{scratch}/ttl=14d/{NAME}/{DAY}/attempts"
    assert artifacts["terminal_manifest_uri"] == f"{prefix}/{NAME}/{DAY}/terminal.json"


def test_object_store_prefix() -> None:
    root = temporary_root("gs://bucket/rl", NAME, DAY, 14)
    assert root == f"gs://bucket/rl/.tmp/ttl=14d/{NAME}/{DAY}"
    paths = RunPaths.derive(f"gs://bucket/rl/{NAME}/{DAY}", root)
    assert paths.checkpoint_root == f"{root}/checkpoints"
    assert paths.terminal_manifest_uri == f"gs://bucket/rl/{NAME}/{DAY}/terminal.json"


def test_fingerprint_document_uses_placeholders_for_paths() -> None:
    artifacts = rl_step().fingerprint_config["launch_document"]["artifacts"]
    assert artifacts["checkpoint_root"] == "<temporary_output_path>/checkpoints"
    assert artifacts["attempts_root"] == "<temporary_output_path>/attempts"
    assert artifacts["export_root"] == "<output_path>/exports"
    assert artifacts["terminal_manifest_uri"] == "<output_path>/terminal.json"


def test_ttl_does_not_change_the_fingerprint() -> None:
    assert rl_step(ttl_days=3).fingerprint == rl_step(ttl_days=14).fingerprint


def test_per_attempt_and_per_step_paths(prefix: str) -> None:
    root = f"{prefix}/.tmp/ttl=14d/{NAME}/{DAY}"
    assert layout.attempt_dir(f"{root}/attempts", "abc123") == f"{root}/attempts/abc123"
    assert layout.attempt_manifest(f"{root}/attempts", "abc123") == f"{root}/attempts/abc123.json"
    assert layout.checkpoint_dir(f"{root}/checkpoints", 40) == f"{root}/checkpoints/global_step_40"
    assert layout.export_policy_dir(f"{prefix}/x/exports", 40) == f"{prefix}/x/exports/global_step_40/policy"
    assert layout.run_record(f"{prefix}/{NAME}/{DAY}") == f"{prefix}/{NAME}/{DAY}/run_record.json"


def test_latest_checkpoint_reads_the_marker_and_digest(prefix: str) -> None:
    root = storage.join(prefix, "ckpts")
    assert layout.latest_checkpoint(root) is None
    assert layout.checkpoint_steps(root) == []
    for step in (10, 20):
        storage.write_json_atomic(
            storage.join(layout.checkpoint_dir(root, step), layout.CHECKPOINT_META), {"runtime_digest": f"d{step}"}
        )
    storage.write_text_atomic(storage.join(root, layout.LATEST_MARKER), "20\n")
    assert layout.checkpoint_steps(root) == [10, 20]
    info = layout.latest_checkpoint(root)
    assert info == layout.CheckpointInfo(step=20, path=layout.checkpoint_dir(root, 20), runtime_digest="d20")
