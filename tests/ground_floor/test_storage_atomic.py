"""Atomic writes in detail: the one JSON encoding of records, temporaries written beside their
target (so the rename is atomic and nothing lands elsewhere), and an exclusive create's file mode
when the filesystem has no hard links."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from rlaunch import storage


def test_records_have_one_encoding_sorted_indented_and_newline_terminated() -> None:
    assert (
        storage.dumps({"b": 1, "a": [Path("/x"), "é"]}) == b'{\n  "a": [\n    "/x",\n    "\\u00e9"\n  ],\n  "b": 1\n}\n'
    )


def test_a_temporary_is_written_beside_its_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    moves: list[tuple[str, str]] = []
    replace, link = os.replace, os.link
    monkeypatch.setattr(os, "replace", lambda src, dst: (moves.append((src, dst)), replace(src, dst))[1])
    monkeypatch.setattr(os, "link", lambda src, dst: (moves.append((src, dst)), link(src, dst))[1])
    target = tmp_path / "d" / "rec.json"
    storage.write_json_atomic(str(target), {"v": 1})
    assert storage.create_exclusive(str(tmp_path / "d" / "lock.json"), b"1")
    assert [os.path.dirname(src) for src, _ in moves] == [str(tmp_path / "d")] * 2
    assert os.path.basename(moves[0][0]).startswith(".rec.json.tmp-")
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in target.parent.iterdir()) == [
        "lock.json",
        "rec.json",
    ]


def test_an_exclusive_create_without_hard_links_is_readable_by_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_links(src: str, dst: str) -> None:
        raise PermissionError("hard links not supported")

    monkeypatch.setattr(os, "link", no_links)
    old = os.umask(0o022)
    try:
        assert storage.create_exclusive(str(tmp_path / "l.json"), b"1")
    finally:
        os.umask(old)
    assert (tmp_path / "l.json").stat().st_mode & 0o777 == 0o644


def _disk_full_at_fsync(monkeypatch: pytest.MonkeyPatch, error: OSError) -> None:
    def full(_: int) -> None:
        raise error  # a write to a full disk names no file

    monkeypatch.setattr(os, "fsync", full)


@pytest.mark.parametrize(
    "write",
    [
        lambda url: storage.write_bytes_atomic(url, b"new"),
        lambda url: storage.write_json_atomic(url, {"v": 2}),
        lambda url: storage.write_text_atomic(url, "new"),
        lambda url: storage.create_exclusive(url, b"new"),
    ],
)
def test_a_write_that_did_not_fit_names_the_path_it_was_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write: Callable[[str], object]
) -> None:
    target = tmp_path / "d" / "rec.json"
    _disk_full_at_fsync(monkeypatch, OSError(errno.ENOSPC, "No space left on device"))
    with pytest.raises(OSError) as raised:
        write(str(target))
    assert (raised.value.errno, raised.value.strerror, raised.value.filename) == (
        errno.ENOSPC,
        "No space left on device",
        str(target),
    )
    assert isinstance(raised.value.__cause__, OSError) and raised.value.__cause__.filename is None
    assert os.listdir(target.parent) == []  # no temporary left beside it, and no target


def test_an_error_keeps_its_errnos_own_class_and_a_path_the_os_gave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = str(tmp_path / "rec.json")
    _disk_full_at_fsync(monkeypatch, OSError(errno.EACCES, "Permission denied"))
    with pytest.raises(PermissionError) as denied:
        storage.write_bytes_atomic(target, b"x")
    assert denied.value.filename == target
    named = OSError(errno.EIO, "Input/output error", "/dev/disk0")
    _disk_full_at_fsync(monkeypatch, named)
    with pytest.raises(OSError) as raised:
        storage.write_bytes_atomic(target, b"x")
    assert raised.value is named  # already named: raised as it was
    bare = OSError("no errno")
    _disk_full_at_fsync(monkeypatch, bare)
    with pytest.raises(OSError) as raised:
        storage.write_bytes_atomic(target, b"x")
    assert raised.value is bare


def test_a_rename_that_fails_leaves_no_temporary_and_raises_its_own_error(tmp_path: Path) -> None:
    target = tmp_path / "rec.json"
    target.mkdir()  # a directory in the way: the rename over it fails
    with pytest.raises(IsADirectoryError) as raised:
        storage.write_bytes_atomic(str(target), b"x")
    assert raised.value.filename is not None and str(target) in (raised.value.filename, raised.value.filename2)
    assert os.listdir(tmp_path) == ["rec.json"] and target.is_dir()
