"""One digest per source: the runtime source digest reads exactly the files that ship.

A plan made from a checkout and a coordinator running an installed wheel of the same commit must
agree on every runtime's digest, or the digest gate and the resume guard refuse the same code.
The declared list (`registry.SHIPPED_PROFILE_FILES`, `SHIPPED_ADAPTER_FILES`) is what the digest
reads and what pyproject's package data ships; the wheel test checks the result end to end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

from rlaunch.runtimes import registry

REPO = Path(__file__).resolve().parents[2]
RUNTIMES = REPO / "src" / "rlaunch" / "runtimes"


def test_package_data_is_the_declared_shipped_list() -> None:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["tool"]["setuptools"]["package-data"]["rlaunch"] == registry.package_data()


def test_no_file_of_a_runtime_is_left_out_of_the_shipped_list() -> None:
    """A file added to a profile or adapter directory that the list does not cover would be neither
    shipped nor hashed: a wheel without it would run something else under the same digest."""
    # Only the profiles under src/ ship: a plugin profile another test in this process registered
    # lives in tests/ and ships nothing (variants of a shipped profile keep its directories).
    builtin = [registry.get_profile(n) for n in registry.profile_names()]
    builtin = [p for p in builtin if Path(p.directory).resolve().is_relative_to(RUNTIMES)]
    assert {p.name for p in builtin} >= {"fsdp", "fsdp-rehearsal", "megatron", "trl-cpu"}
    left_out = []
    for profile in builtin:
        for root, shipped in (
            (profile.directory, registry.SHIPPED_PROFILE_FILES),
            (profile.adapter_dir, registry.SHIPPED_ADAPTER_FILES),
        ):
            covered = set(registry.shipped_files(root, shipped))
            for path in Path(root).rglob("*"):
                relative = path.relative_to(root).as_posix()
                derived = "__pycache__" in path.parts or relative.endswith(".parsed.json")
                if path.is_file() and not derived and relative not in covered:
                    left_out.append(f"{root}/{relative}")
    assert not left_out


def test_the_digest_covers_every_shipped_file_it_lists(tmp_path: Path) -> None:
    """Each file the list names changes the digest (requirements.in included): none is read and ignored."""
    profile = registry.get_profile("fsdp")
    copy = tmp_path / "fsdp"
    shutil.copytree(profile.directory, copy, ignore=shutil.ignore_patterns("__pycache__"))
    moved = dataclasses.replace(profile, directory=str(copy))
    assert moved.source_digest == profile.source_digest
    assert registry.shipped_files(str(copy), registry.SHIPPED_PROFILE_FILES) == [
        "lock.txt", "profile.yaml", "requirements.in", "uv.toml"
    ]  # fmt: skip
    with open(copy / "requirements.in", "a", encoding="utf-8") as handle:
        handle.write("# edited\n")
    assert dataclasses.replace(profile, directory=str(copy)).source_digest != profile.source_digest


_DIGESTS = (
    "import json, rlaunch\n"
    "from rlaunch.runtimes import registry\n"
    "print(json.dumps({'file': rlaunch.__file__, "
    "'digests': {n: registry.get_profile(n).source_digest for n in registry.profile_names()}}))\n"
)


@pytest.mark.runtime  # builds a wheel and installs it
def test_a_wheel_gives_every_runtime_the_editable_installs_digest(tmp_path: Path) -> None:
    """Build the wheel from this checkout, install it in a fresh venv, compare every runtime's digest."""
    tree = tmp_path / "tree"
    shutil.copytree(REPO / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, tree / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(tree), "--no-deps", "-q", "-w", str(tmp_path / "dist")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if built.returncode != 0:
        pytest.fail(f"building the wheel failed:\n{built.stdout[-3000:]}{built.stderr[-3000:]}")
    (wheel,) = (tmp_path / "dist").glob("rlaunch-*.whl")
    fresh = tmp_path / "fresh"
    venv.create(fresh, with_pip=True)
    python = str(fresh / "bin" / "python")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, capture_output=True, timeout=600
    )
    builtin_only = {k: v for k, v in os.environ.items() if k != registry.PLUGINS_ENV}
    shown = subprocess.run(
        [python, "-I", "-c", _DIGESTS], cwd=tmp_path, env=builtin_only, capture_output=True, text=True, timeout=120
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    installed = json.loads(shown.stdout)
    assert installed["file"].startswith(str(fresh)), installed["file"]  # the wheel's copy, not this checkout
    assert set(installed["digests"]) == {"fsdp", "fsdp-rehearsal", "megatron", "trl-cpu"}
    # Compared by the wheel's names: other tests in this process may have registered test profiles.
    editable = {n: registry.get_profile(n).source_digest for n in installed["digests"]}
    assert installed["digests"] == editable


def test_the_digest_is_sha256_over_the_shipped_files_by_label_and_path_then_the_base_config(tmp_path: Path) -> None:
    """The digest's format, pinned: a file that does not ship (another suffix, deeper than the list
    says, a cache) changes nothing; path order is part by part."""
    import hashlib

    profile, adapter, base = tmp_path / "p", tmp_path / "a", tmp_path / "base.yaml"
    files = {
        profile / "lock.txt": b"L", profile / "profile.yaml": b"P", profile / "requirements.in": b"R",
        profile / "notes.md": b"N", profile / "sub" / "x.yaml": b"S", adapter / "pkg" / "a.py": b"A",
        adapter / "pkg" / "a" / "deep.py": b"D", adapter / "pkg-b" / "c.py": b"C", adapter / "pkg" / "x.pyc": b"Y",
        adapter / "top.py": b"T", base: b"B",
    }  # fmt: skip
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    expected = hashlib.sha256(
        b"profile/lock.txt\0L\0profile/profile.yaml\0P\0profile/requirements.in\0R\0"
        b"adapter/pkg/a.py\0A\0adapter/pkg-b/c.py\0C\0base_config\0B"
    ).hexdigest()
    assert registry.source_digest(str(profile), str(adapter), str(base)) == expected
    assert registry.shipped_files(str(adapter), registry.SHIPPED_ADAPTER_FILES) == ["pkg/a.py", "pkg-b/c.py"]
    assert registry.shipped_files(str(tmp_path / "missing"), ("*",)) == []
