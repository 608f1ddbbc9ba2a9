"""Local locations are served without fsspec, with fsspec's semantics.

`rlaunch.storage` resolves a plain path or `file://` URL itself and uses `os`; these tests hold
that route to what fsspec's LocalFileSystem does with the same location (the path it resolves,
what each operation returns or raises), and show a whole local round trip never imports fsspec.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import fsspec.core
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlaunch import storage

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.parametrize("url", ["rel/x", "rel/x/", "./a/../b", "~/x", "/a/b/", "/", "", "file:///tmp/x", "/t/a b"])
def test_a_local_location_resolves_as_fsspec_resolves_it(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert storage.local_path(url) == fsspec.core.url_to_fs(url)[1]
    assert storage.is_local(url)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab._-~ /", min_size=1, max_size=6), min_size=1, max_size=4))
def test_any_plain_path_resolves_as_fsspec_resolves_it(parts):
    url = "/".join(parts)
    if "://" in url or "::" in url:
        return
    assert storage.local_path(url) == fsspec.core.url_to_fs(url)[1]


def test_remote_urls_are_not_local():
    assert not storage.is_local("memory://bucket/x")
    with pytest.raises(ValueError, match="not on the local filesystem"):
        storage.local_path("memory://bucket/x")


def test_local_operations_behave_as_on_fsspecs_local_filesystem(tmp_path):
    fs = fsspec.filesystem("file")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.json").write_text('{"a": 1}')
    for where in ("d", "d/f.json", "missing"):
        url = str(tmp_path / where)
        assert storage.exists(url) == fs.exists(url)
        try:
            listed = sorted(os.path.basename(e.rstrip("/")) for e in fs.ls(url, detail=False))
        except FileNotFoundError:
            listed = []
        assert storage.list_names(url) == listed, where
    assert storage.read_json(str(tmp_path / "d" / "f.json")) == {"a": 1}
    assert storage.read_json(str(tmp_path / "missing")) is None
    with pytest.raises(IsADirectoryError):
        storage.read_bytes(str(tmp_path / "d"))
    with pytest.raises(ValueError, match="recursive=True"):
        storage.remove(str(tmp_path / "d"))
    storage.remove(str(tmp_path / "missing"))  # nothing there is fine
    storage.remove(str(tmp_path / "d"), recursive=True)
    assert not (tmp_path / "d").exists()


def test_a_local_round_trip_never_imports_fsspec(tmp_path):
    code = f"""
import sys
from pathlib import Path
from rlaunch import storage
root = Path({str(tmp_path)!r})
storage.write_json_atomic(root / "a" / "r.json", {{"x": 1}})
assert storage.read_json(f"file://{{root}}/a/r.json") == {{"x": 1}}
assert storage.create_exclusive(str(root / "a" / "once"), b"1") and not storage.create_exclusive(str(root / "a" / "once"), b"2")
storage.write_text_atomic(str(root / "a" / "t.txt"), "t")
assert storage.rename(str(root / "a" / "t.txt"), str(root / "a" / "u.txt"))
assert storage.list_names(str(root / "a")) == ["once", "r.json", "u.txt"] and storage.exists(str(root / "a" / "u.txt"))
storage.remove(str(root / "a"), recursive=True)
print(sorted(m for m in sys.modules if m.split(".")[0] == "fsspec"))
"""
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
    assert not (tmp_path / "a").exists()


def test_other_urls_still_go_through_fsspec():
    url = "memory://rlaunch-storage-test/r.json"
    storage.write_json_atomic(url, {"x": 1})
    assert storage.read_json(url) == {"x": 1} and storage.list_names("memory://rlaunch-storage-test") == ["r.json"]
    storage.remove("memory://rlaunch-storage-test", recursive=True)
    assert not storage.exists(url)


def test_find_and_get_file_locally_as_fsspec_and_in_memory(tmp_path):
    fs = fsspec.filesystem("file")
    (tmp_path / "m" / "sub").mkdir(parents=True)
    for rel in ("config.json", "sub/w.bin", ".hidden"):
        (tmp_path / "m" / rel).write_bytes(rel.encode())
    local = str(tmp_path / "m")
    assert storage.find(local) == sorted(os.path.relpath(p, local) for p in fs.find(local))
    assert storage.find(local) == [".hidden", "config.json", "sub/w.bin"]
    assert storage.find(str(tmp_path / "missing")) == [] == fs.find(str(tmp_path / "missing"))
    storage.get_file(storage.join(local, "sub/w.bin"), str(tmp_path / "copy"))
    assert (tmp_path / "copy").read_bytes() == b"sub/w.bin"
    remote = "memory://rlaunch-find-test/m"
    for rel in ("config.json", "sub/w.bin"):
        storage.write_text_atomic(storage.join(remote, rel), rel)
    assert storage.find(remote) == ["config.json", "sub/w.bin"]
    storage.get_file(storage.join(remote, "sub/w.bin"), str(tmp_path / "from-memory"))
    assert (tmp_path / "from-memory").read_text() == "sub/w.bin"
    storage.remove("memory://rlaunch-find-test", recursive=True)
