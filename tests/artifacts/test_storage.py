"""Storage: `{prefix}/{name}/{version}` through fsspec, atomic writes, exclusive creates."""

from __future__ import annotations

import os

import fsspec
import pytest

from rlaunch import storage

from .helpers import make_step


@pytest.mark.parametrize(
    ("base", "parts", "expected"),
    [
        ("/data/p", ("m", "2026.11.30"), "/data/p/m/2026.11.30"),
        ("/data/p/", ("m", "2026.11.30"), "/data/p/m/2026.11.30"),
        ("/data/p///", ("m/x", "dev"), "/data/p/m/x/dev"),
        ("/", ("m", "dev"), "/m/dev"),
        ("memory://x", ("m", "dev"), "memory://x/m/dev"),
        ("memory://x/", ("m", "dev"), "memory://x/m/dev"),
        ("s3://bucket/", ("models/tiny", "2026.11.30"), "s3://bucket/models/tiny/2026.11.30"),
        ("s3://bucket", ("models/tiny", "2026.11.30"), "s3://bucket/models/tiny/2026.11.30"),
        ("gs://bucket/runs/", ("a/", "/b"), "gs://bucket/runs/a/b"),
        ("file:///tmp/p/", ("a",), "file:///tmp/p/a"),
        ("/data/p", (), "/data/p"),
    ],
)
def test_join_never_doubles_slashes(base, parts, expected):
    joined = storage.join(base, *parts)
    assert joined == expected
    assert "//" not in joined.split("://", 1)[-1]


@pytest.mark.parametrize("configured", ["memory://x/", "s3://bucket/", "s3://bucket", "/srv/artifacts/"])
def test_step_paths_under_a_configured_prefix(monkeypatch, configured):
    monkeypatch.setenv("RLAUNCH_PREFIX", configured)
    path = make_step("models/tiny").path()
    assert path == configured.rstrip("/") + "/models/tiny/2026.11.30"
    assert "//" not in path.split("://", 1)[-1]


def test_default_prefix_is_a_folder_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert storage.default_prefix() == str(tmp_path / storage.DEFAULT_PREFIX_DIR)
    assert make_step("a").path() == f"{tmp_path}/rlaunch-artifacts/a/2026.11.30"


def test_a_relative_prefix_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RLAUNCH_PREFIX", "out/here")
    assert storage.default_prefix() == str(tmp_path / "out" / "here")


def test_json_round_trip_and_missing_files(any_prefix):
    url = storage.join(any_prefix, "a", "b.json")
    assert storage.read_json(url) is None
    assert not storage.exists(url)
    storage.write_json_atomic(url, {"x": [1, 2], "y": "z"})
    assert storage.exists(url)
    assert storage.read_json(url) == {"x": [1, 2], "y": "z"}
    storage.write_text_atomic(storage.join(any_prefix, "a", "t.txt"), "hello")
    assert storage.read_text(storage.join(any_prefix, "a", "t.txt")) == "hello"
    assert storage.list_names(storage.join(any_prefix, "a")) == ["b.json", "t.txt"]
    assert storage.list_names(storage.join(any_prefix, "missing")) == []


def test_memory_prefix_writes_land_in_the_memory_filesystem(memory_prefix):
    storage.write_json_atomic(storage.join(memory_prefix, "m", "dev", "f.json"), {"ok": True})
    fs = fsspec.filesystem("memory")
    assert fs.exists(memory_prefix.split("://", 1)[1] + "/m/dev/f.json")


def test_an_atomic_write_interrupted_mid_way_leaves_the_old_file(tmp_path, monkeypatch):
    tmp_path = tmp_path / "w"
    url = str(tmp_path / "rec.json")
    storage.write_json_atomic(url, {"version": 1})

    def crash(*args, **kwargs):
        raise OSError("disk vanished")

    monkeypatch.setattr(os, "fsync", crash)
    with pytest.raises(OSError, match="disk vanished"):
        storage.write_json_atomic(url, {"version": 2, "big": "x" * 100_000})
    assert storage.read_json(url) == {"version": 1}
    assert os.listdir(tmp_path) == ["rec.json"]  # no temporary left behind


def test_an_atomic_write_never_exposes_a_partial_file(tmp_path, monkeypatch):
    url = str(tmp_path / "rec.json")
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append(os.path.exists(dst))  # the target does not exist until the rename
        assert os.path.getsize(src) > 100_000  # everything was written before the rename
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    storage.write_json_atomic(url, {"big": "x" * 100_000})
    assert seen == [False] and storage.read_json(url)["big"] == "x" * 100_000


def test_create_exclusive_creates_once(any_prefix):
    url = storage.join(any_prefix, "locks", "one.json")
    assert storage.create_exclusive(url, b'{"who": "first"}')
    assert not storage.create_exclusive(url, b'{"who": "second"}')
    assert storage.read_json(url) == {"who": "first"}


def test_create_exclusive_without_hard_links_is_still_exclusive(tmp_path, monkeypatch):
    def no_links(src, dst):
        raise PermissionError("hard links not supported")

    monkeypatch.setattr(os, "link", no_links)
    tmp_path = tmp_path / "w"
    tmp_path.mkdir()
    url = str(tmp_path / "l.json")
    assert storage.create_exclusive(url, b"1")
    assert not storage.create_exclusive(url, b"2")
    assert storage.read_text(url) == "1"
    assert os.listdir(tmp_path) == ["l.json"]


def test_rename_reports_a_vanished_source(any_prefix):
    src, dst = storage.join(any_prefix, "s.json"), storage.join(any_prefix, "d.json")
    storage.write_json_atomic(src, 1)
    assert storage.rename(src, dst)
    assert storage.read_json(dst) == 1 and storage.read_json(src) is None
    assert not storage.rename(src, dst)


def test_remove_is_quiet_for_missing_files(any_prefix):
    url = storage.join(any_prefix, "gone.json")
    storage.remove(url)
    storage.write_json_atomic(url, 1)
    storage.remove(url)
    assert not storage.exists(url)


def test_is_local(tmp_path, memory_prefix):
    assert storage.is_local(str(tmp_path))
    assert not storage.is_local(memory_prefix)
    assert storage.local_path(str(tmp_path)) == str(tmp_path)
    with pytest.raises(ValueError):
        storage.local_path(memory_prefix)


@pytest.mark.parametrize("root", ["/", "//", "file:///", "s3://", "memory://"])
def test_a_filesystem_root_is_refused_as_the_prefix(monkeypatch: pytest.MonkeyPatch, root: str) -> None:
    monkeypatch.setenv(storage.PREFIX_ENV, root)
    with pytest.raises(storage.StorageError, match="is a filesystem root; .* give it a directory of its own"):
        storage.default_prefix()


def test_a_prefix_under_a_file_is_not_writable(tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    problem = storage.writable_problem(str(tmp_path / "file" / "prefix"))
    assert problem is not None and "is not writable" in problem and "RLAUNCH_PREFIX" in problem
    assert storage.writable_problem(str(tmp_path / "fresh" / "deeper")) is None
    assert not (tmp_path / "fresh").exists()  # a local prefix is judged without writing anything


def test_a_memory_prefix_is_probed_and_the_probe_removed() -> None:
    assert storage.writable_problem("memory://probed/prefix") is None
    assert storage.list_names("memory://probed/prefix") == []
