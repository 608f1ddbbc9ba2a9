"""Profiles and base configs load from their JSON twins when fresh, and from the YAML otherwise."""

from __future__ import annotations

import json
import zlib

import yaml

from rlaunch.runtimes import parsed


def test_every_builtin_twin_is_fresh():
    sources = parsed.builtin_sources()
    assert any(s.endswith("profile.yaml") for s in sources) and any("base_configs" in s for s in sources)
    for source in sources:
        with open(parsed.twin_path(source), encoding="utf-8") as handle:
            twin = json.load(handle)
        assert json.dumps(twin) == json.dumps(parsed.twin_of(source)), (  # mapping order too
            f"{parsed.twin_path(source)} is stale: run `python -m rlaunch.runtimes.parsed` after editing {source}"
        )
        with open(source, encoding="utf-8") as handle:
            assert parsed.load(source) == yaml.safe_load(handle)


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
