"""Profiles, base configs and locks load from their JSON twins when fresh, and from the source otherwise."""

from __future__ import annotations

import json
import zlib

import yaml

from rlaunch.runtimes import parsed
from rlaunch.runtimes.lockfile import read_lock_file


def test_every_builtin_twin_is_fresh():
    sources = parsed.builtin_sources()
    assert any(s.endswith("profile.yaml") for s in sources) and any("base_configs" in s for s in sources)
    assert any(s.endswith("fsdp/lock.txt") for s in sources)
    for source in sources:
        with open(parsed.twin_path(source), encoding="utf-8") as handle:
            twin = json.load(handle)
        assert json.dumps(twin) == json.dumps(parsed.twin_of(source)), (  # mapping order too
            f"{parsed.twin_path(source)} is stale: run `python -m rlaunch.runtimes.parsed` after editing {source}"
        )
        if source.endswith("lock.txt"):
            assert parsed.load(source) == [[p.name, p.version, p.requirement] for p in read_lock_file(source)]
            continue
        with open(source, encoding="utf-8") as handle:
            assert parsed.load(source) == yaml.safe_load(handle)


def test_a_stale_lock_twin_is_not_used(tmp_path):
    lock = tmp_path / "lock.txt"
    lock.write_text("vllm==0.30.0 \\\n    --hash=sha256:ab\n", encoding="utf-8")
    (tmp_path / "lock.parsed.json").write_text(json.dumps({"source_crc32": 1, "data": [["vllm", "0.1", "x"]]}))
    assert parsed.load(str(lock)) == [["vllm", "0.30.0", "vllm==0.30.0"]]


def _files(directory, text: str, twin: object) -> str:
    directory.mkdir(exist_ok=True)
    source = directory / "profile.yaml"
    source.write_text(text, encoding="utf-8")
    if twin is not None:
        (directory / "profile.parsed.json").write_text(json.dumps(twin), encoding="utf-8")
    return str(source)


def test_a_fresh_twin_is_what_loads(tmp_path):
    text = "strategy: fsdp\n"
    source = _files(
        tmp_path / "fresh", text, {"source_crc32": zlib.crc32(text.encode()), "data": {"strategy": "from-twin"}}
    )
    assert parsed.load(source) == {"strategy": "from-twin"}  # the YAML was not parsed


def test_a_stale_or_foreign_twin_is_ignored(tmp_path):
    text = "strategy: megatron\n"
    for name, twin in (("stale", {"source_crc32": 1, "data": {}}), ("foreign", ["not", "a", "twin"]), ("none", None)):
        assert parsed.load(_files(tmp_path / name, text, twin)) == {"strategy": "megatron"}, name
