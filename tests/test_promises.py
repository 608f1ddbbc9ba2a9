"""Tests of the tests: every safety promise's test fails when its guard is removed or weakened.

For each guard in `tests/promises.py`, a copy of the checkout gets the weakening a real bug would
make (a deleted check, a widened pattern, absent read as fine, a prefix compare) and the guard's
tests run there: each must fail. README's "What rlaunch guarantees" table must be the same table.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.promises import PROMISES, Guard, readme_table

REPO = Path(__file__).resolve().parents[1]
GUARDS = [(p.text, g) for p in PROMISES for g in p.guards]


def _guard_id(item: tuple[str, Guard]) -> str:
    text, guard = item
    return re.sub(r"[^a-z0-9]+", "-", f"{text[:32]} {guard.weakening[:40]}".lower()).strip("-")


def test_each_weakening_edits_its_guard_exactly_once() -> None:
    """A guard rewritten since the table was made shows up here first, naming the text not found."""
    for _, guard in GUARDS:
        source = (REPO / guard.path).read_text(encoding="utf-8")
        for old, _new in guard.edits:
            assert source.count(old) == 1, f"{guard.path}: {old!r} occurs {source.count(old)} times"
        for test in guard.tests:
            path, _, name = test.partition("::")
            assert f"def {name.partition('[')[0]}(" in (REPO / path).read_text(encoding="utf-8"), test


def test_the_readme_table_is_the_promise_table() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## What rlaunch guarantees", 1)[1].split("\n## ", 1)[0]
    assert [line for line in section.splitlines() if line.startswith("|")] == readme_table()


def weakened_checkout(guard: Guard, root: Path) -> Path:
    copy = root / "checkout"
    for name in ("src", "tests", "experiments"):
        shutil.copytree(REPO / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, copy / name)
    # tests that start rlaunch in a subprocess put only the checkout's root on PYTHONPATH
    (copy / "rlaunch").symlink_to(Path("src") / "rlaunch", target_is_directory=True)
    target = copy / guard.path
    source = target.read_text(encoding="utf-8")
    for old, new in guard.edits:
        assert source.count(old) == 1, f"{guard.path}: {old!r}"
        source = source.replace(old, new)
    target.write_text(source, encoding="utf-8")
    return copy


@pytest.mark.parametrize("item", GUARDS, ids=_guard_id)
def test_removing_a_guard_fails_its_tests(item: tuple[str, Guard], tmp_path: Path) -> None:
    promise, guard = item
    copy = weakened_checkout(guard, tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLAUNCH_")}
    env["PYTHONPATH"] = f"{copy / 'src'}{os.pathsep}{copy}"  # the copy, not this checkout's editable install
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf", *guard.tests],
        cwd=copy, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    failed = re.findall(r"^FAILED (\S+)", done.stdout, re.M)
    survived = [t for t in guard.tests if not any(f == t or f.startswith(t + "[") for f in failed)]
    assert done.returncode == 1 and not survived, (
        f"{promise}: with {guard.weakening} ({guard.path}), these tests still pass: {survived}\n{done.stdout[-3000:]}"
    )
