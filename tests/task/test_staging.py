"""Staging refuses a corrupted, substituted or incomplete input and never leaves a half-staged copy.

Each case builds a real artifact directory with its record and stages it into a task root, as a
replica does before the trainer starts; the assertions name the exact error and what is (and is
not) left on disk.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import time
from pathlib import Path

import pytest

from rlaunch import storage
from rlaunch.paths import ConfinementError
from rlaunch.task import staging
from rlaunch.task.staging import MANIFEST, StagingError, stage, verify_identity

from .conftest import make_artifact, sha256

WEIGHTS = {"config.json": b'{"layers": 2}', "model.safetensors": b"weights" * 100, "sub/tokenizer.json": b"{}"}
FP = "f" * 64
OTHER_FP = "0123456789ab" + "e" * 52


def staged(tmp_path: Path, uri: str, identity: str, lines: list[str] | None = None) -> Path:
    root = tmp_path / "task"
    target = root / "models" / "tiny"
    result = stage(uri, identity, str(target), (lines if lines is not None else []).append, root=str(root))
    assert result == str(target)
    return target


def leftovers(tmp_path: Path) -> list[str]:
    """Every file and every directory named like an input or a half-staged copy, under the task root."""
    root = tmp_path / "task"
    found = [p for p in root.rglob("*") if p.is_file() or p.name.startswith("tiny")] if root.exists() else []
    return sorted(str(p.relative_to(root)) for p in found)


def test_a_verified_copy_lands_with_its_manifest_and_without_the_record(tmp_path: Path) -> None:
    uri, identity = make_artifact(tmp_path / "art", WEIGHTS)
    lines: list[str] = []
    target = staged(tmp_path, uri, identity, lines)
    copied = {str(p.relative_to(target)): p.read_bytes() for p in target.rglob("*") if p.is_file()}
    manifest = json.loads(copied.pop(MANIFEST))
    assert copied == WEIGHTS  # the record and status files (dot files) stay behind
    assert manifest == {"uri": uri, "identity": identity, "files": 3, "bytes": sum(len(d) for d in WEIGHTS.values())}
    assert lines == [
        "staging models/tiny@2026.12.01: 3/3 files, 0.0 MB",
        f"staged models/tiny@2026.12.01 -> {target}, 3 checksum(s) verified",
    ]
    assert leftovers(tmp_path) == ["models/tiny", *(f"models/tiny/{n}" for n in sorted([MANIFEST, *WEIGHTS]))]


def test_progress_every_twenty_files_with_the_megabytes_so_far(tmp_path: Path) -> None:
    files = {f"shard-{i:02d}.bin": bytes([i]) * 100_000 for i in range(41)}
    uri, identity = make_artifact(tmp_path / "art", files, checksums={})
    lines: list[str] = []
    target = staged(tmp_path, uri, identity, lines)
    assert lines == [
        "staging models/tiny@2026.12.01: 20/41 files, 2.0 MB",
        "staging models/tiny@2026.12.01: 40/41 files, 4.0 MB",
        "staging models/tiny@2026.12.01: 41/41 files, 4.1 MB",
        f"staged models/tiny@2026.12.01 -> {target}",  # the record lists no checksums: none claimed
    ]


def test_progress_counts_megabytes_of_a_million_bytes(tmp_path: Path) -> None:
    uri, identity = make_artifact(tmp_path / "art", {"weights.bin": b"w" * 1_050_000}, checksums={})
    lines: list[str] = []
    staged(tmp_path, uri, identity, lines)
    assert lines[0] == "staging models/tiny@2026.12.01: 1/1 files, 1.1 MB"  # 1,050,000 bytes: 1.05 MB, rounded


@pytest.mark.parametrize("corrupt", ["model.safetensors", "sub/tokenizer.json"])
def test_a_corrupted_file_is_refused_and_nothing_is_staged(tmp_path: Path, corrupt: str) -> None:
    uri, identity = make_artifact(tmp_path / "art", WEIGHTS)
    (tmp_path / "art" / corrupt).write_bytes(b"bit rot")  # after the record listed its sha256
    with pytest.raises(StagingError) as info:
        staged(tmp_path, uri, identity)
    assert str(info.value) == f"{uri}/{corrupt} does not match the sha256 its artifact record lists"
    assert leftovers(tmp_path) == []  # no target, no half-staged temporary directory


def test_a_file_the_record_does_not_list_is_copied_unchecked(tmp_path: Path) -> None:
    uri, identity = make_artifact(tmp_path / "art", WEIGHTS, checksums={"config.json": sha256(WEIGHTS["config.json"])})
    (tmp_path / "art" / "model.safetensors").write_bytes(b"changed, but nobody listed it")
    lines: list[str] = []
    target = staged(tmp_path, uri, identity, lines)
    assert (target / "model.safetensors").read_bytes() == b"changed, but nobody listed it"
    assert lines[-1] == f"staged models/tiny@2026.12.01 -> {target}, 1 checksum(s) verified"


def test_only_the_files_the_record_lists_pass_through_the_hashing_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unlisted file is copied inside the kernel, byte for byte past any chunk size; hashing it
    would cost CPU (staging's bottleneck) and check nothing."""
    big = os.urandom((1 << 20) + 17)
    files = {"config.json": b'{"layers": 2}', "model.safetensors": big}
    uri, identity = make_artifact(tmp_path / "art", files, checksums={"config.json": sha256(files["config.json"])})
    hashed: list[str] = []
    copy_hashed = storage.copy_hashed
    monkeypatch.setattr(storage, "copy_hashed", lambda url, local: hashed.append(url) or copy_hashed(url, local))
    target = staged(tmp_path, uri, identity)
    assert hashed == [f"{uri}/config.json"]
    assert (target / "model.safetensors").read_bytes() == big
    assert json.loads((target / MANIFEST).read_text())["bytes"] == len(big) + len(files["config.json"])


def test_a_missing_file_the_record_lists_is_refused(tmp_path: Path) -> None:
    checksums = {rel: sha256(d) for rel, d in WEIGHTS.items()} | {"model-2.safetensors": "a" * 64}
    uri, identity = make_artifact(tmp_path / "art", WEIGHTS, checksums=checksums)
    with pytest.raises(StagingError) as info:
        staged(tmp_path, uri, identity)
    assert str(info.value) == f"{uri} lacks files its artifact record lists: ['model-2.safetensors']"
    assert leftovers(tmp_path) == []


def test_an_artifact_without_files_is_refused(tmp_path: Path) -> None:
    uri, identity = make_artifact(tmp_path / "art", {})
    with pytest.raises(StagingError) as info:
        staged(tmp_path, uri, identity)
    assert str(info.value) == f"{uri} holds no files to stage"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("record", "expected", "holds"),
    [
        # substituted: same name and version, another fingerprint (the input was rebuilt)
        ({"fingerprint": OTHER_FP}, f"models/tiny@2026.12.01:{FP}", "models/tiny@2026.12.01:0123456789ab"),
        # another version of the same artifact
        ({"version": "2026.12.02"}, f"models/tiny@2026.12.01:{FP}", f"models/tiny@2026.12.02:{FP[:12]}"),
        # another artifact altogether
        ({"name": "models/other"}, f"models/tiny@2026.12.01:{FP}", f"models/other@2026.12.01:{FP[:12]}"),
        # no fingerprint expected: name and version must still match
        ({"version": "2026.12.02"}, "models/tiny@2026.12.01", f"models/tiny@2026.12.02:{FP[:12]}"),
    ],
)
def test_a_substituted_artifact_is_refused_before_anything_is_copied(
    tmp_path: Path, record: dict[str, str], expected: str, holds: str
) -> None:
    fields = {"name": "models/tiny", "version": "2026.12.01", "fingerprint": FP} | record
    uri, _ = make_artifact(tmp_path / "art", WEIGHTS, **fields)
    with pytest.raises(StagingError) as info:
        staged(tmp_path, uri, expected)
    assert str(info.value) == (
        f"{uri} holds {holds} but the launch document expects {expected[:80]}; "
        "the input changed since the document was rendered"
    )
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("position", [12, 63], ids=["first-unprinted", "last"])
def test_a_fingerprint_differing_only_past_its_printed_part_is_refused(tmp_path: Path, position: int) -> None:
    """The message prints 12 characters of the fingerprint; the compare reads all 64."""
    rebuilt = FP[:position] + "0" + FP[position + 1 :]
    uri, _ = make_artifact(tmp_path / "art", WEIGHTS, fingerprint=rebuilt)
    with pytest.raises(StagingError, match="the input changed since the document was rendered"):
        staged(tmp_path, uri, f"models/tiny@2026.12.01:{FP}")
    assert leftovers(tmp_path) == []


def test_an_input_staged_under_a_fingerprint_differing_in_its_last_character_is_staged_again(tmp_path: Path) -> None:
    old_uri, old_identity = make_artifact(tmp_path / "old", {"stale.bin": b"old"}, fingerprint=FP[:63] + "0")
    target = staged(tmp_path, old_uri, old_identity)
    uri, identity = make_artifact(tmp_path / "art", WEIGHTS)
    assert identity[:-1] == old_identity[:-1]
    staged(tmp_path, uri, identity)
    assert not (target / "stale.bin").exists()
    assert json.loads((target / MANIFEST).read_text())["identity"] == identity


def test_the_expected_identity_is_cut_at_80_characters_in_the_message(tmp_path: Path) -> None:
    uri, _ = make_artifact(tmp_path / "art", WEIGHTS)
    with pytest.raises(StagingError) as info:
        verify_identity(uri, f"models/tiny@2026.12.01:{OTHER_FP}")
    assert f"expects models/tiny@2026.12.01:{OTHER_FP[:57]}; the input" in str(info.value)


def test_an_identity_without_fingerprint_accepts_the_record_of_that_name_and_version(tmp_path: Path) -> None:
    uri, _ = make_artifact(tmp_path / "art", WEIGHTS, fingerprint=OTHER_FP)
    assert verify_identity(uri, "models/tiny@2026.12.01")["fingerprint"] == OTHER_FP
    assert verify_identity(uri, f"models/tiny@2026.12.01:{OTHER_FP}")["name"] == "models/tiny"


def test_a_directory_without_a_record_is_not_the_artifact(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "model.safetensors").write_bytes(b"w")
    uri = str(tmp_path / "plain")
    with pytest.raises(StagingError) as info:
        staged(tmp_path, uri, f"models/tiny@2026.12.01:{FP}")
    assert str(info.value) == f"{uri} has no artifact record; it is not the artifact models/tiny@2026.12.01:{FP}"


def test_an_input_already_staged_with_the_same_identity_is_reused(tmp_path: Path) -> None:
    uri, identity = make_artifact(tmp_path / "art", WEIGHTS)
    target = staged(tmp_path, uri, identity)
    (target / "config.json").write_bytes(b"kept")  # a re-copy would overwrite this
    lines: list[str] = []
    staged(tmp_path, uri, identity, lines)
    assert lines == [f"staging models/tiny@2026.12.01: already staged at {target}"]
    assert (target / "config.json").read_bytes() == b"kept"


def test_an_input_staged_for_another_identity_is_replaced(tmp_path: Path) -> None:
    old_uri, old_identity = make_artifact(tmp_path / "old", {"stale.bin": b"old"}, version="2026.11.01")
    target = staged(tmp_path, old_uri, old_identity)
    uri, identity = make_artifact(tmp_path / "art", WEIGHTS)
    staged(tmp_path, uri, identity)
    assert not (target / "stale.bin").exists()
    assert json.loads((target / MANIFEST).read_text())["identity"] == identity


def test_a_failed_restage_keeps_the_previous_good_copy(tmp_path: Path) -> None:
    old_uri, old_identity = make_artifact(tmp_path / "old", {"stale.bin": b"old"}, version="2026.11.01")
    target = staged(tmp_path, old_uri, old_identity)
    uri, identity = make_artifact(tmp_path / "art", WEIGHTS)
    (tmp_path / "art" / "config.json").write_bytes(b"corrupted")
    with pytest.raises(StagingError, match="does not match the sha256"):
        staged(tmp_path, uri, identity)
    assert (target / "stale.bin").read_bytes() == b"old"
    assert leftovers(tmp_path) == ["models/tiny", f"models/tiny/{MANIFEST}", "models/tiny/stale.bin"]


@pytest.mark.parametrize("where", ["outside", "new outside", "root", "escape"])
def test_a_target_outside_the_task_root_is_refused_before_anything_is_touched(tmp_path: Path, where: str) -> None:
    uri, identity = make_artifact(tmp_path / "art", WEIGHTS)
    root = tmp_path / "task"
    root.mkdir()
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    target = {
        "outside": precious,
        "new outside": tmp_path / "elsewhere" / "tiny",
        "root": root,
        "escape": root / ".." / "precious",
    }[where]
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ConfinementError) as info:
        stage(uri, identity, str(target), [].append, root=str(root))
    assert "refusing to touch it" in str(info.value)
    assert os.listdir(precious) == ["thesis.tex"] and os.listdir(root) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no copy, no temporary directory beside it


def test_copy_hashed_copies_and_hashes_files_larger_than_one_chunk(tmp_path: Path) -> None:
    data = os.urandom((1 << 20) + 17)
    (tmp_path / "big").write_bytes(data)
    digest, size = storage.copy_hashed(str(tmp_path / "big"), str(tmp_path / "copy"), chunk=1 << 16)
    assert (digest, size) == (sha256(data), len(data))
    assert (tmp_path / "copy").read_bytes() == data


STEP = 1 << 18


@pytest.mark.parametrize("size", [0, 1, STEP - 1, STEP, STEP + 1, 3 * STEP + 17])
def test_copy_hashed_copies_in_kernel_steps_and_hashes_what_landed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    """A local source goes through sendfile a step at a time, each step hashed from the copy: every
    step boundary, a partial last step and an empty file keep each byte and the sha256."""
    monkeypatch.setattr(storage, "KERNEL_STEP", STEP)
    data = os.urandom(size)
    (tmp_path / "big").write_bytes(data)
    digest, copied = storage.copy_hashed(str(tmp_path / "big"), str(tmp_path / "copy"), chunk=1 << 16)
    assert (digest, copied) == (sha256(data), size)
    assert (tmp_path / "copy").read_bytes() == data


def test_copy_hashed_streams_where_the_kernel_cannot_sendfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: int) -> int:
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(os, "sendfile", refused)
    data = os.urandom((1 << 20) + 17)
    (tmp_path / "big").write_bytes(data)
    assert storage.copy_hashed(str(tmp_path / "big"), str(tmp_path / "copy"), chunk=1 << 16) == (
        sha256(data),
        len(data),
    )
    assert (tmp_path / "copy").read_bytes() == data


def test_copy_hashed_raises_a_sendfile_failure_after_bytes_were_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Streaming again would hash a file the kernel half wrote: only a refusal before any byte streams."""
    monkeypatch.setattr(storage, "KERNEL_STEP", STEP)
    sendfile = os.sendfile

    def fails_second(out: int, source: int, offset: int, count: int) -> int:
        if offset:
            raise OSError(errno.EINVAL, "Invalid argument")
        return sendfile(out, source, offset, count)

    monkeypatch.setattr(os, "sendfile", fails_second)
    (tmp_path / "big").write_bytes(os.urandom(2 * STEP))
    with pytest.raises(OSError, match="Invalid argument"):
        storage.copy_hashed(str(tmp_path / "big"), str(tmp_path / "copy"))


def test_copy_hashed_reads_through_fsspec(tmp_path: Path) -> None:
    import fsspec

    with fsspec.open("memory://staging-test/w.bin", "wb") as handle:
        handle.write(b"y" * 70_000)
    digest, size = storage.copy_hashed("memory://staging-test/w.bin", str(tmp_path / "w.bin"), chunk=4096)
    assert (digest, size) == (sha256(b"y" * 70_000), 70_000)
    assert (tmp_path / "w.bin").read_bytes() == b"y" * 70_000


class Watched:
    """storage.copy_hashed, slowed a little so copies overlap, counting how many run at once."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.copy, self.lock = storage.copy_hashed, threading.Lock()
        self.in_flight, self.most = 0, 0
        monkeypatch.setattr(storage, "copy_hashed", self)

    def __call__(self, url: str, local: str, **kwargs: int) -> tuple[str, int]:
        with self.lock:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
        try:
            time.sleep(0.02)
            return self.copy(url, local, **kwargs)
        finally:
            with self.lock:
                self.in_flight -= 1


@pytest.mark.parametrize("bad", [0, 5, 11])
def test_a_corrupted_file_among_many_in_flight_is_refused_and_nothing_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: int
) -> None:
    files = {f"shard-{i:02d}.bin": bytes([i]) * 300_000 for i in range(12)}
    uri, identity = make_artifact(tmp_path / "art", files)
    (tmp_path / "art" / f"shard-{bad:02d}.bin").write_bytes(b"bit rot")  # after the record listed its sha256
    copies = Watched(monkeypatch)
    with pytest.raises(StagingError) as info:
        staged(tmp_path, uri, identity)
    assert str(info.value) == f"{uri}/shard-{bad:02d}.bin does not match the sha256 its artifact record lists"
    assert copies.most > 1 and copies.in_flight == 0  # copied in parallel; every copy stopped before the refusal
    assert leftovers(tmp_path) == []  # no target, no half-staged temporary directory


def test_the_copies_in_flight_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(staging, "COPIES_IN_FLIGHT", 3)
    files = {f"f{i}.bin": bytes([i]) * 1000 for i in range(10)}
    uri, identity = make_artifact(tmp_path / "art", files)
    copies = Watched(monkeypatch)
    target = staged(tmp_path, uri, identity)
    assert copies.most == 3
    assert sorted(p.name for p in target.iterdir()) == sorted([MANIFEST, *files])
