"""Atomic writes in detail: the one JSON encoding of records, temporaries written beside their
target (so the rename is atomic and nothing lands elsewhere), and an exclusive create's file mode
when the filesystem has no hard links."""

from __future__ import annotations

import os
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
