"""The checkpoint manifest both sides rely on: each adapter lists every file of a checkpoint with its
size and sha256 as it writes the checkpoint, and the launcher's resume verifies exactly that list
(`rlaunch.runs.resume.checkpoint_problem`, `verified_resume`)."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

from rlaunch.runs.resume import ResumePoint, checkpoint_problem, fall_back, verified_resume
from rlaunch.runtimes.registry import get_profile

for _name in ("trl-cpu", "fsdp"):
    sys.path.insert(0, str(get_profile(_name).adapter_dir))

from rlaunch_skyrl import checkpoints as skyrl  # noqa: E402
from rlaunch_trl_cpu import checkpoints as trl  # noqa: E402


def _trl_checkpoint(root: Path, tmp_path: Path, step: int) -> Path:
    local = tmp_path / f"local-{step}"
    (local / "optimizer").mkdir(parents=True)
    (local / "model.safetensors").write_bytes(b"w" * 1000 * step)
    (local / "optimizer" / "state.pt").write_bytes(b"o" * 10)
    return Path(trl.CheckpointStore(str(root)).publish(str(local), step, {"runtime_digest": "d"}))


def test_trl_cpu_lists_every_file_and_the_launcher_verifies_it(tmp_path: Path) -> None:
    checkpoint = _trl_checkpoint(tmp_path / "ckpt", tmp_path, 2)
    files = json.loads((checkpoint / trl.INFO_FILE).read_text())["files"]
    assert sorted(files) == ["model.safetensors", "optimizer/state.pt"]
    assert files["model.safetensors"]["size"] == 2000
    assert checkpoint_problem(str(checkpoint)) is None

    (checkpoint / "optimizer" / "state.pt").write_bytes(b"o" * 9)
    assert "optimizer/state.pt has 9 bytes, its manifest says 10" in checkpoint_problem(str(checkpoint))
    (checkpoint / "optimizer" / "state.pt").write_bytes(b"x" * 10)  # same size, other bytes
    assert "optimizer/state.pt does not match its manifest's sha256" in checkpoint_problem(str(checkpoint))
    (checkpoint / "optimizer" / "state.pt").unlink()
    assert "optimizer/state.pt is missing" in checkpoint_problem(str(checkpoint))


def test_skyrl_mirror_lists_the_committed_checkpoints_files_only(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    for step in (2, 4):
        (root / f"global_step_{step}" / "policy").mkdir(parents=True)
        (root / f"global_step_{step}" / "policy" / "model.pt").write_bytes(b"p" * step)
    (root / skyrl.SKYRL_LATEST).write_text("2")  # step 4 is still being written
    assert skyrl.mirror(str(root), "d") == 2
    meta = json.loads((root / "global_step_2" / skyrl.META).read_text())
    assert meta["files"] == {"policy/model.pt": {"size": 2, "sha256": meta["files"]["policy/model.pt"]["sha256"]}}
    assert not (root / "global_step_4" / skyrl.META).exists()
    assert checkpoint_problem(str(root / "global_step_2")) is None
    (root / "global_step_2" / "policy" / "model.pt").write_bytes(b"p")
    assert "policy/model.pt has 1 bytes" in checkpoint_problem(str(root / "global_step_2"))


def test_resume_falls_back_to_the_newest_checkpoint_that_verifies(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    for step in (2, 4, 6):
        _trl_checkpoint(root, tmp_path, step)
    assert verified_resume(str(root)).info.step == 6 and not verified_resume(str(root)).skipped
    (root / "global_step_6" / "model.safetensors").write_bytes(b"w")
    (root / "global_step_4" / "model.safetensors").write_bytes(b"w")
    point = verified_resume(str(root))
    assert point.info.step == 2 and [p for p, _ in point.skipped] == [
        str(root / "global_step_6"),
        str(root / "global_step_4"),
    ]
    fall_back(str(root), point)
    assert (root / "latest").read_text().strip() == "2" and trl.CheckpointStore(str(root)).steps() == [2]
    assert sorted(p.name.split("-")[1] for p in root.glob("damaged-*")) == ["global_step_4", "global_step_6"]


def test_with_no_checkpoint_that_verifies_there_is_no_resume_point(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    _trl_checkpoint(root, tmp_path, 2)
    assert verified_resume(str(tmp_path / "none")) is None
    (root / "global_step_2" / "model.safetensors").write_bytes(b"")
    point = verified_resume(str(root))
    assert point.info is None and "global_step_2" in point.notes()[0] and "0 bytes" in point.notes()[0]


def test_an_unfinished_checkpoint_between_damaged_and_good_ones_is_passed_over(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    for step in (2, 6):
        _trl_checkpoint(root, tmp_path, step)
    (root / "global_step_4").mkdir()  # begun, never finished: no manifest
    (root / "global_step_4" / "model.safetensors").write_bytes(b"w")
    (root / "global_step_6" / "model.safetensors").write_bytes(b"w")
    point = verified_resume(str(root))
    assert point.info is not None and point.info.step == 2
    assert [p for p, _ in point.skipped] == [str(root / "global_step_6")]  # the unfinished one is no problem


def test_fall_back_moves_the_damaged_aside_with_a_time_stamp_and_writes_no_marker_the_runtime_lacks(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ckpt"
    for step in (2, 4):
        _trl_checkpoint(root, tmp_path, step)
    (root / "global_step_4" / "model.safetensors").write_bytes(b"w")
    point = verified_resume(str(root))
    assert point.info is not None
    fall_back(str(root), ResumePoint(point.info, tuple((f"{path}/", problem) for path, problem in point.skipped)))
    (moved,) = root.glob("damaged-*")
    assert re.fullmatch(r"damaged-global_step_4-\d{8}T\d{6}", moved.name) and (moved / trl.INFO_FILE).exists()
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith("damaged-")) == ["global_step_2", "latest"]
    assert (root / "latest").read_text() == "2\n"


def test_fall_back_on_a_skyrl_root_killed_before_its_mirror_sets_both_markers(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    for step in (2, 4):
        (root / f"global_step_{step}" / "policy").mkdir(parents=True)
        (root / f"global_step_{step}" / "policy" / "model.pt").write_bytes(b"p" * step)
    (root / skyrl.SKYRL_LATEST).write_text("4")
    skyrl.mirror(str(root), "d")
    (root / "latest").unlink()  # only SkyRL's own marker: rlaunch's was never written
    (root / "global_step_4" / "policy" / "model.pt").write_bytes(b"p")
    point = verified_resume(str(root))
    assert point.info is not None and point.info.step == 2
    fall_back(str(root), point)
    assert ((root / "latest").read_text(), (root / skyrl.SKYRL_LATEST).read_text()) == ("2\n", "2\n")


def test_a_publish_retried_from_the_same_directory_lists_no_earlier_info_file(tmp_path: Path) -> None:
    local = tmp_path / "local"
    local.mkdir()
    (local / "model.safetensors").write_bytes(b"w" * 3)
    (local / trl.INFO_FILE).write_text('{"global_step": 3, "files": {}}')  # left by a publish that failed
    checkpoint = Path(trl.CheckpointStore(str(tmp_path / "ckpt")).publish(str(local), 3, {"runtime_digest": "d"}))
    assert list(json.loads((checkpoint / trl.INFO_FILE).read_text())["files"]) == ["model.safetensors"]
    assert checkpoint_problem(str(checkpoint)) is None


def test_skyrl_lists_each_file_by_its_whole_path_inside_the_checkpoint(tmp_path: Path) -> None:
    root = tmp_path / "ckpt"
    (root / "global_step_2" / "policy").mkdir(parents=True)
    (root / "global_step_2" / "policy" / "model.pt").write_bytes(b"p" * 2)
    (root / "global_step_2" / "XLA_rng_state.pt").write_bytes(b"r")  # a name beginning with X keeps it
    (root / skyrl.SKYRL_LATEST).write_text("2")
    skyrl.mirror(str(root), "d")
    files = json.loads((root / "global_step_2" / skyrl.META).read_text())["files"]
    assert list(files) == ["XLA_rng_state.pt", "policy/model.pt"]
    assert files["XLA_rng_state.pt"] == {"size": 1, "sha256": hashlib.sha256(b"r").hexdigest()}
