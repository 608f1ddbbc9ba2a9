"""The adapters' checkpoint guards, in process: resume refuses a checkpoint another runtime or
another run wrote, a damaged or incomplete checkpoint is refused (never read as absent), and
retention removes only this trajectory's older checkpoints.

The trl-cpu guard (`rlaunch_trl_cpu.checkpoints`) and the SkyRL guard (`rlaunch_skyrl.checkpoints`)
need only fsspec, so they run here; the full trl-cpu runs in its own environment
(tests/runtimes/test_trl_cpu.py) show the same refusal end to end.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import pytest

from rlaunch.runtimes.registry import get_profile

for _name in ("trl-cpu", "fsdp"):
    sys.path.insert(0, str(get_profile(_name).adapter_dir))

from rlaunch_skyrl import checkpoints as skyrl  # noqa: E402
from rlaunch_trl_cpu import checkpoints as trl  # noqa: E402

DIGEST, OTHER, RUN, OTHER_RUN = "a" * 64, "b" * 64, "f" * 64, "e" * 64


# -- trl-cpu -------------------------------------------------------------------------------------


def publish(store: trl.CheckpointStore, tmp_path: Path, step: int, **info: str) -> str:
    local = tmp_path / f"local-{step}"
    local.mkdir()
    (local / "model.safetensors").write_bytes(b"w" * step)
    return store.publish(str(local), step, {"runtime_digest": DIGEST, "run_fingerprint": RUN, **info})


def test_publish_writes_the_checkpoint_then_its_info_then_latest(tmp_path: Path) -> None:
    store = trl.CheckpointStore(str(tmp_path / "ckpt"))
    assert store.latest() is None and store.steps() == []
    where = publish(store, tmp_path, 2)
    assert where == str(tmp_path / "ckpt" / "global_step_2")
    assert (tmp_path / "ckpt" / "latest").read_text() == "2\n"
    info = store.info(2)
    assert info["global_step"] == 2 and info["runtime_digest"] == DIGEST and info["run_fingerprint"] == RUN
    assert info["written_at"] > 0
    assert (Path(where) / "model.safetensors").read_bytes() == b"ww"
    assert store.latest() == 2 and store.steps() == [2]


def test_on_object_storage_the_info_file_is_put_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a rename, the info file written after every other file is what marks a checkpoint whole."""
    from fsspec.implementations.memory import MemoryFileSystem

    order: list[str] = []
    put = MemoryFileSystem.put_file
    monkeypatch.setattr(
        MemoryFileSystem, "put_file", lambda fs, lpath, rpath, **kw: (order.append(rpath), put(fs, lpath, rpath, **kw))
    )
    store = trl.CheckpointStore(f"memory://guards-{uuid.uuid4().hex}/ckpt")  # memory is per process
    local = tmp_path / "local"
    local.mkdir()
    for name in ("z.safetensors", "a.json", "optimizer.pt"):
        (local / name).write_bytes(b"x")
    store.publish(str(local), 7, {"runtime_digest": DIGEST})
    assert len(order) == 4 and order[-1].endswith("global_step_7/" + trl.INFO_FILE)
    assert store.latest() == 7 and store.steps() == [7]


def test_a_checkpoint_without_its_info_file_is_incomplete(tmp_path: Path) -> None:
    store = trl.CheckpointStore(str(tmp_path))
    (tmp_path / "global_step_3").mkdir()  # a copy cut short: no rlaunch_checkpoint.json
    (tmp_path / "global_step_x").mkdir()
    (tmp_path / "global_step_4").mkdir()
    (tmp_path / "global_step_4" / trl.INFO_FILE).write_text("{}")
    assert store.steps() == [4]
    (tmp_path / "latest").write_text("3\n")
    with pytest.raises(trl.ResumeRefused, match="global_step_3.*is missing: the checkpoint is incomplete"):
        store.info(3)


@pytest.mark.parametrize("text", ["", "three", "3.0", "-1x"])
def test_a_damaged_latest_marker_refuses_resume(tmp_path: Path, text: str) -> None:
    (tmp_path / "latest").write_text(text)
    with pytest.raises(trl.ResumeRefused, match="not a step number"):
        trl.CheckpointStore(str(tmp_path)).latest()


def test_latest_reads_the_marker_with_surrounding_whitespace(tmp_path: Path) -> None:
    (tmp_path / "latest").write_text(" 12\n")
    assert trl.CheckpointStore(str(tmp_path)).latest() == 12


def test_retention_keeps_the_newest_up_to_latest_and_leaves_later_ones(tmp_path: Path) -> None:
    store = trl.CheckpointStore(str(tmp_path / "ckpt"))
    for step in (1, 2, 3, 4):
        publish(store, tmp_path, step)
    (tmp_path / "ckpt" / "latest").write_text("3\n")  # step 4 belongs to another trajectory
    assert store.prune(0) == [] and store.prune(-1) == []
    assert store.steps() == [1, 2, 3, 4]
    assert store.prune(2) == [1]
    assert store.steps() == [2, 3, 4]
    assert store.prune(1) == [2]
    assert store.steps() == [3, 4]


def test_retention_without_a_marker_judges_every_checkpoint(tmp_path: Path) -> None:
    store = trl.CheckpointStore(str(tmp_path / "ckpt"))
    for step in (1, 2, 3):
        publish(store, tmp_path, step)
    (tmp_path / "ckpt" / "latest").unlink()
    assert store.prune(1) == [1, 2] and store.steps() == [3]


def check(info: dict[str, str], current: str = DIGEST, compatible: tuple[str, ...] = (), fingerprint: str = RUN):
    trl.check_digest(trl.CheckpointStore("/ckpt"), 5, info, current, list(compatible), fingerprint)


def test_trl_cpu_resumes_only_the_same_runtime_and_run() -> None:
    check({"runtime_digest": DIGEST, "run_fingerprint": RUN})  # the same runtime and run
    with pytest.raises(trl.ResumeRefused) as refused:
        check({"runtime_digest": OTHER, "run_fingerprint": RUN})
    message = str(refused.value)
    assert "/ckpt/global_step_5" in message and OTHER in message and DIGEST in message
    assert (
        "none declared). Use a fresh RL artifact version (its checkpoint root is new), or declare the checkpoint "
        f"compatible in the spec: compatible_checkpoint_digests=[{OTHER!r}]."
    ) in message
    with pytest.raises(trl.ResumeRefused, match="run fingerprint " + OTHER_RUN) as refused:
        check({"runtime_digest": DIGEST, "run_fingerprint": OTHER_RUN})
    message = str(refused.value)
    assert message.startswith("refusing to resume checkpoint /ckpt/global_step_5: it was written under run")
    assert f"this run's is {RUN} (a changed recipe, plan or input). Use a fresh RL artifact version, or " in message
    assert f"declare the checkpoint compatible in the spec: compatible_checkpoint_digests=[{OTHER_RUN!r}]." in message


def test_trl_cpu_a_checkpoint_without_identity_is_not_resumed() -> None:
    """Absent is not fine: a checkpoint that records no digest or no fingerprint is foreign."""
    with pytest.raises(trl.ResumeRefused, match="runtime digest None"):
        check({"run_fingerprint": RUN})
    with pytest.raises(trl.ResumeRefused, match="run fingerprint unknown"):
        check({"runtime_digest": DIGEST})


def test_trl_cpu_declared_compatible_checkpoints_resume() -> None:
    check({"runtime_digest": OTHER, "run_fingerprint": RUN}, compatible=(OTHER,))
    check({"runtime_digest": DIGEST, "run_fingerprint": OTHER_RUN}, compatible=(OTHER_RUN,))
    with pytest.raises(trl.ResumeRefused, match=f"compatible digests: \\['{'c' * 64}'\\]"):
        check({"runtime_digest": OTHER, "run_fingerprint": RUN}, compatible=("c" * 64,))


def test_trl_cpu_without_a_fingerprint_or_digest_of_its_own_checks_what_it_has() -> None:
    """An older launcher sets no fingerprint (only the digest is compared); no digest: nothing to compare."""
    check({"runtime_digest": DIGEST, "run_fingerprint": OTHER_RUN}, fingerprint="")
    check({"runtime_digest": OTHER, "run_fingerprint": RUN}, current="")
    trl.check_digest(trl.CheckpointStore("/ckpt"), 5, {"runtime_digest": DIGEST}, DIGEST, [])  # no fingerprint given


# -- SkyRL ---------------------------------------------------------------------------------------


def skyrl_checkpoint(root: Path, step: int) -> None:
    (root / f"global_step_{step}").mkdir(parents=True, exist_ok=True)
    (root / skyrl.SKYRL_LATEST).write_text(str(step))


def claim(root: Path) -> dict[str, object]:
    return json.loads((root / skyrl.RUNTIME_FILE).read_text())


def test_skyrl_guard_claims_the_root_with_digest_and_fingerprint(tmp_path: Path) -> None:
    root = tmp_path / "new" / "ckpt"
    skyrl.guard(str(root), "latest", DIGEST, [], fingerprint=RUN)
    recorded = claim(root)
    assert recorded["runtime_digest"] == DIGEST and recorded["run_fingerprint"] == RUN and recorded["written_at"] > 0


def test_skyrl_guard_refuses_another_runtime_and_names_both(tmp_path: Path) -> None:
    skyrl.guard(str(tmp_path), "latest", DIGEST, [], fingerprint=RUN)
    skyrl_checkpoint(tmp_path, 3)
    with pytest.raises(skyrl.ForeignCheckpointError) as refused:
        skyrl.guard(str(tmp_path), "latest", OTHER, [], fingerprint=RUN)
    message = str(refused.value)
    assert str(tmp_path) in message and f"runtime digest {DIGEST[:16]}, but this runtime is {OTHER[:16]};" in message
    assert message.endswith("declare the checkpoint compatible in the spec (compatible_checkpoint_digests)")
    assert "compatible_checkpoint_digests" in message
    assert claim(tmp_path)["runtime_digest"] == DIGEST  # a refusal claims nothing


def test_skyrl_guard_refuses_another_run_and_names_both(tmp_path: Path) -> None:
    skyrl.guard(str(tmp_path), "latest", DIGEST, [], fingerprint=RUN)
    skyrl_checkpoint(tmp_path, 3)
    with pytest.raises(skyrl.ForeignCheckpointError) as refused:
        skyrl.guard(str(tmp_path), "latest", DIGEST, [], fingerprint=OTHER_RUN)
    assert f"run fingerprint {RUN[:16]}, but this run is {OTHER_RUN[:16]} (" in str(refused.value)
    assert str(refused.value).endswith("declare the checkpoint compatible in the spec (compatible_checkpoint_digests)")
    assert claim(tmp_path)["run_fingerprint"] == RUN


def test_skyrl_guard_lets_a_fresh_start_or_an_empty_root_through(tmp_path: Path) -> None:
    skyrl.guard(str(tmp_path), "latest", DIGEST, [], fingerprint=RUN)
    skyrl.guard(str(tmp_path), "latest", OTHER, [], fingerprint=OTHER_RUN)  # no checkpoint yet: nothing to resume
    assert claim(tmp_path)["runtime_digest"] == OTHER
    skyrl_checkpoint(tmp_path, 3)
    skyrl.guard(str(tmp_path), "none", DIGEST, [], fingerprint=RUN)  # not resuming: may start over
    assert claim(tmp_path) | {"written_at": 0} == {"runtime_digest": DIGEST, "run_fingerprint": RUN, "written_at": 0}


def test_skyrl_guard_resumes_the_same_or_declared_compatible(tmp_path: Path) -> None:
    skyrl.guard(str(tmp_path), "latest", DIGEST, [], fingerprint=RUN)
    skyrl_checkpoint(tmp_path, 3)
    skyrl.guard(str(tmp_path), "latest", DIGEST, [], fingerprint=RUN)
    skyrl.guard(str(tmp_path), "latest", OTHER, [DIGEST], fingerprint=RUN)
    skyrl.guard(str(tmp_path), "latest", OTHER, [], fingerprint=RUN)  # the root now says OTHER
    skyrl.guard(str(tmp_path), "latest", OTHER, [RUN], fingerprint=OTHER_RUN)


def test_skyrl_guard_without_a_fingerprint_compares_the_digest_only(tmp_path: Path) -> None:
    skyrl.guard(str(tmp_path), "latest", DIGEST, [], fingerprint=RUN)
    skyrl_checkpoint(tmp_path, 3)
    skyrl.guard(str(tmp_path), "latest", DIGEST, [])
    with pytest.raises(skyrl.ForeignCheckpointError):
        skyrl.guard(str(tmp_path), "latest", OTHER, [])


def test_skyrl_guard_resumes_a_root_claimed_before_fingerprints_were_recorded(tmp_path: Path) -> None:
    skyrl.guard(str(tmp_path), "latest", DIGEST, [])  # an older launcher: the claim's fingerprint is ""
    skyrl_checkpoint(tmp_path, 3)
    skyrl.guard(str(tmp_path), "latest", DIGEST, [], fingerprint=RUN)


def test_skyrl_mirror_on_object_storage_and_without_a_fingerprint(tmp_path: Path) -> None:
    import fsspec

    root = f"/mirror-{uuid.uuid4().hex}"  # memory is per process: a fresh root each time
    fs = fsspec.filesystem("memory")
    fs.pipe_file(f"{root}/global_step_6/model.pt", b"w")
    fs.pipe_file(f"{root}/{skyrl.SKYRL_LATEST}", b"6\n")
    assert skyrl.mirror(f"memory://{root}", DIGEST) == 6
    meta = json.loads(fs.cat_file(f"{root}/global_step_6/{skyrl.META}"))
    assert meta["run_fingerprint"] == "" and meta["runtime_digest"] == DIGEST


def test_skyrl_mirror_describes_every_checkpoint_once(tmp_path: Path) -> None:
    assert skyrl.mirror(str(tmp_path), DIGEST, RUN) is None  # SkyRL wrote nothing yet
    assert not (tmp_path / "latest").exists()
    skyrl_checkpoint(tmp_path, 2)
    skyrl_checkpoint(tmp_path, 4)
    (tmp_path / "global_step_2" / skyrl.META).write_text(json.dumps({"runtime_digest": OTHER}))  # already described
    (tmp_path / "not_a_step").mkdir()
    assert skyrl.mirror(str(tmp_path), DIGEST, RUN) == 4
    assert (tmp_path / "latest").read_text() == "4"
    meta = json.loads((tmp_path / "global_step_4" / skyrl.META).read_text())
    assert meta["global_step"] == 4 and meta["runtime_digest"] == DIGEST and meta["run_fingerprint"] == RUN
    assert meta["written_at"] > 0
    assert json.loads((tmp_path / "global_step_2" / skyrl.META).read_text()) == {"runtime_digest": OTHER}
    assert not (tmp_path / "not_a_step" / skyrl.META).exists()


def test_skyrl_resume_settings_read_the_trainer_section() -> None:
    assert skyrl.resume_settings({"trainer": {"ckpt_path": "/c", "resume_mode": "latest"}}) == ("/c", "latest")
    assert skyrl.resume_settings({"trainer": {"ckpt_path": "/c"}}) == ("/c", None)
