"""Runtime profiles, base configs and locks, parsed once per process, without YAML or `packaging` on the fast path.

The YAML files and locks are the source (they carry comments). Beside each built-in one lies a JSON twin,
`<stem>.parsed.json` = `{"source_crc32": <crc32 of the source bytes>, "data": <the parsed source>}`,
written by `python -m rlaunch.runtimes.parsed`. A lock's data is `[[name, version, requirement], ...]`
(`rlaunch.runtimes.lockfile`; hashes stay in the lock, which the builder reads). `load` reads the
twin when its checksum matches the source's bytes and parses the source otherwise (an edited file,
a plugin's profile), so a stale twin can cost time but never change behaviour. Reading JSON instead
of importing PyYAML or parsing a 300-package lock is what keeps a cold `check_plan` near the
interpreter's own start-up time; a test keeps the twins fresh.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import zlib
from typing import Any

TWIN_SUFFIX = ".parsed.json"
_HERE = os.path.dirname(os.path.abspath(__file__))


def twin_path(path: str | os.PathLike[str]) -> str:
    """`profile.yaml` -> `profile.parsed.json` in the same directory."""
    root, _ = os.path.splitext(os.fspath(path))
    return root + TWIN_SUFFIX


@functools.cache
def load(path: str | os.PathLike[str]) -> Any:
    """The data of the YAML file or lock at `path` (parsed once per process; callers must not mutate it)."""
    with open(path, "rb") as handle:
        source = handle.read()
    try:
        with open(twin_path(path), encoding="utf-8") as handle:
            twin = json.load(handle)
        if twin.get("source_crc32") == zlib.crc32(source):
            return twin["data"]
    except (OSError, ValueError, AttributeError, KeyError):
        pass  # no twin, or not one of ours: parse the source
    return _parse(os.fspath(path), source)


def _parse(path: str, source: bytes) -> Any:
    if path.endswith(".txt"):
        from rlaunch.runtimes.lockfile import read_lock

        return [[pin.name, pin.version, pin.requirement] for pin in read_lock(source.decode("utf-8"), path)]
    return _parse_yaml(source)


def _parse_yaml(source: bytes) -> Any:
    import yaml  # only for a file without a fresh twin

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(source, Loader=loader)  # noqa: S506 - a safe loader


def builtin_sources() -> list[str]:
    """The files that ship with rlaunch and get twins: every profile, base config and profile lock."""
    out = []
    for entry in sorted(os.listdir(_HERE)):
        directory = os.path.join(_HERE, entry)
        if entry in ("base_configs", "known_defects"):
            out += [os.path.join(directory, f) for f in sorted(os.listdir(directory)) if f.endswith(".yaml")]
        elif os.path.isfile(os.path.join(directory, "profile.yaml")):
            out.append(os.path.join(directory, "profile.yaml"))
            if os.path.isfile(os.path.join(directory, "lock.txt")):
                out.append(os.path.join(directory, "lock.txt"))
    return out


def twin_of(path: str) -> dict[str, Any]:
    """The twin `path` should have (what `write_twins` writes and the freshness test expects)."""
    with open(path, "rb") as handle:
        source = handle.read()
    data = _parse(path, source)
    if json.loads(json.dumps(data)) != data:
        raise ValueError(f"{path} holds values JSON cannot carry (dates, non-string keys); quote them")
    return {"source_crc32": zlib.crc32(source), "data": data}


def write_twins() -> list[str]:
    """(Re)write the twin of every built-in YAML file; returns the twins' paths."""
    from rlaunch import storage

    written = []
    for path in builtin_sources():
        target = twin_path(path)
        # not storage.write_json_atomic: that sorts keys, and a mapping's order is data here
        storage.write_text_atomic(target, json.dumps(twin_of(path), indent=1) + "\n")
        written.append(target)
    return written


if __name__ == "__main__":
    for written_path in write_twins():
        sys.stdout.write(f"wrote {os.path.relpath(written_path)}\n")
