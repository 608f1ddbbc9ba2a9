"""The runtime and tier locks are whole: every package pinned exactly, with sha256 hashes of files the
public registry serves for linux x86_64 and the lock's CPython, and the source digest covers them.

The registry check reads metadata only (the simple index's JSON, PEP 691), never a distribution.
It needs the network the CI machine has; without it the test fails under CI and skips elsewhere.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from packaging import tags
from packaging.utils import parse_sdist_filename, parse_wheel_filename
from packaging.version import Version

from rlaunch.runtimes.lockfile import Pin, read_lock, read_lock_file
from rlaunch.runtimes.registry import get_profile

REPO = Path(__file__).resolve().parents[2]
RUNTIMES = REPO / "src" / "rlaunch" / "runtimes"
LOCKS = {  # lock -> the CPython it is for
    "fsdp": (RUNTIMES / "fsdp" / "lock.txt", (3, 12)),
    "megatron": (RUNTIMES / "megatron" / "lock.txt", (3, 12)),
    "trl-cpu": (RUNTIMES / "trl_cpu" / "lock.txt", (3, 11)),
    "contract": (REPO / "tests" / "contract" / "skyrl" / "lock.txt", (3, 12)),
    "iris": (REPO / "tests" / "iris" / "lock.txt", (3, 12)),
}
SIMPLE = "https://pypi.org/simple/{}/"


def linux_x86_64(python: tuple[int, int]) -> set[tags.Tag]:
    """The wheel tags CPython `python` on manylinux_2_28 x86_64 installs."""
    platforms = [f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)]
    platforms += ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
    abi = f"cp{python[0]}{python[1]}"
    return {
        *tags.cpython_tags(python, abis=[abi, "abi3", "none"], platforms=platforms),
        *tags.compatible_tags(python, interpreter=abi, platforms=platforms),
    }


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_every_package_is_pinned_exactly_with_hashes(name: str) -> None:
    pins = read_lock_file(str(LOCKS[name][0]))
    assert len(pins) > 40
    loose = [p.requirement for p in pins if p.version is None or not p.hashes]
    assert loose == [], f"{name}: not pinned exactly with hashes"
    assert len({p.name for p in pins}) == len(pins)
    assert not any(p.name in ("flashinfer-jit-cache", "flashinfer-cubin") for p in pins)  # not on the registry


Files = dict[Version, list[tuple[str, frozenset[tags.Tag] | None]]]  # version -> (sha256:hex, wheel tags | sdist)


def _registry_files(name: str) -> Files:
    """The registry's files of `name` by version, read from the simple index's JSON (metadata only)."""
    request = urllib.request.Request(SIMPLE.format(name), headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        listing = json.load(response)["files"]
    out: Files = {}
    for f in listing:
        filename, digest = f["filename"], "sha256:" + f["hashes"].get("sha256", "")
        try:
            if filename.endswith(".whl"):
                _, version, _, wheel_tags = parse_wheel_filename(filename)
            else:
                (_, version), wheel_tags = parse_sdist_filename(filename), None
        except ValueError:
            continue
        if not f.get("yanked"):
            out.setdefault(version, []).append((digest, wheel_tags))
    return out


def _problems(pin: Pin, files: Files, supported: set[tags.Tag]) -> list[str]:
    """What is wrong with `pin` against the registry's files of its name (empty: it holds)."""
    mine = files.get(Version(pin.version), [])
    if not mine:
        return [f"{pin.name}=={pin.version} is not on the registry"]
    out = []
    # an sdist is built on the node (the GPU locks' requirements.in say which and how)
    if not any(digest in pin.hashes and (wheel is None or wheel & supported) for digest, wheel in mine):
        out.append(f"{pin.name}=={pin.version}: no locked file installs on linux x86_64 for this CPython")
    unknown = set(pin.hashes) - {digest for digest, _ in mine}
    if unknown:
        out.append(f"{pin.name}=={pin.version}: {len(unknown)} locked hash(es) name no file of the registry")
    return out


@pytest.mark.runtime  # reads the registry for every pin: seconds per lock
def test_every_pin_exists_on_the_registry_for_linux_x86_64() -> None:
    wanted: dict[str, list[tuple[Pin, set[tags.Tag]]]] = {}
    for path, python in LOCKS.values():
        supported = linux_x86_64(python)
        for pin in read_lock_file(str(path)):
            if Version(pin.version).local is None:  # a local build (torch +cpu) comes from find-links
                wanted.setdefault(pin.name, []).append((pin, supported))
    try:
        with ThreadPoolExecutor(16) as pool:
            files = dict(zip(wanted, pool.map(_registry_files, wanted), strict=True))
    except (urllib.error.URLError, OSError) as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"the registry is not reachable from here ({exc}); CI runs this check")
    problems = [p for name, pins in wanted.items() for pin, sup in pins for p in _problems(pin, files[name], sup)]
    assert problems == []
    assert len(wanted) > 300


def test_the_trl_cpu_lock_pins_the_cpu_build_of_torch() -> None:
    (torch,) = [p for p in read_lock_file(str(LOCKS["trl-cpu"][0])) if p.name == "torch"]
    assert torch.version == "2.13.0+cpu" and len(torch.hashes) == 1


def test_one_package_changed_in_a_lock_changes_the_source_digest(tmp_path: Path) -> None:
    fsdp = get_profile("fsdp")
    assert len(fsdp.lock_requirements()) > 100
    shutil.copytree(fsdp.directory, tmp_path / "fsdp")
    copied = dataclasses.replace(fsdp, directory=str(tmp_path / "fsdp"))
    assert copied.source_digest == fsdp.source_digest
    lock = tmp_path / "fsdp" / "lock.txt"
    text = lock.read_text()
    assert "\nvllm==0.30.0 " in text
    lock.write_text(text.replace("\nvllm==0.30.0 ", "\nvllm==0.30.1 "))
    bumped = dataclasses.replace(fsdp, directory=str(tmp_path / "fsdp"))
    assert bumped.locked_versions()["vllm"] == "0.30.1"
    assert bumped.source_digest != fsdp.source_digest
    assert len(bumped.lock_requirements()) == len(fsdp.lock_requirements())


def test_a_lock_is_read_by_logical_line() -> None:
    text = "# header\nJinja2==3.1.6 \\\n    --hash=sha256:aa \\\n    --hash=sha256:bb\n    # via x\ntorch>=2  # loose\n"
    assert read_lock(text) == (
        Pin("jinja2", "3.1.6", "Jinja2==3.1.6", ("sha256:aa", "sha256:bb")),
        Pin("torch", None, "torch>=2", ()),
    )
