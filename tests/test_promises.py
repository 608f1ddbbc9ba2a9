"""Tests of the tests: every safety promise's test fails when its guard is removed or weakened.

For each guard in `tests/promises.py`, a copy of the checkout gets the weakening a real bug would
make (a deleted check, a widened pattern, absent read as fine, a prefix compare) and the guard's
tests run there: each must fail. The table in docs/guarantees.md must be the same table. A guard is
found by its holder (the function or class, by `ast`) and its text within it, whitespace aside, so
the locator's own tests show a reformatted or moved guard is still found and an ambiguous one is not.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.promises import PROMISES, Guard, GuardNotFound, guarantees_table, locate, weaken

REPO = Path(__file__).resolve().parents[1]
GUARDS = [(p.text, g) for p in PROMISES for g in p.guards]


def _guard_id(item: tuple[str, Guard]) -> str:
    text, guard = item
    return re.sub(r"[^a-z0-9]+", "-", f"{text[:32]} {guard.weakening[:40]}".lower()).strip("-")


def test_each_weakening_edits_its_guard_exactly_once() -> None:
    """A guard rewritten since the table was made shows up here first, naming its holder and the text not found."""
    for _, guard in GUARDS:
        source = (REPO / guard.path).read_text(encoding="utf-8")
        assert guard.where or not guard.path.endswith(".py"), f"{guard.path}: a Python guard names its holder"
        for old, _new in guard.edits:
            locate(source, guard.where, old)  # raises GuardNotFound naming the holder and the text
        assert weaken(source, guard) != source
        for test in guard.tests:
            path, _, name = test.partition("::")
            assert f"def {name.partition('[')[0]}(" in (REPO / path).read_text(encoding="utf-8"), test


def test_the_guarantees_page_is_the_promise_table() -> None:
    text = (REPO / "docs" / "guarantees.md").read_text(encoding="utf-8")
    assert [line for line in text.splitlines() if line.startswith("|")] == guarantees_table()


_HELD = """\
import os


def unrelated(a):
    return a


class Keeper:
    def check(self, digest, expected):
        if digest != expected:
            raise ValueError(digest)
        return digest
"""
_GUARD = Guard("x.py", (("if digest != expected:", "if False:"),), (), "the compare deleted", "Keeper.check")


def test_a_guard_is_found_in_its_holder_after_a_reformat_and_code_moved_around_it() -> None:
    moved = _HELD.replace("def unrelated(a):\n    return a", "def renamed(b):\n    return b\n\n\nX = 1")
    reformatted = moved.replace("if digest != expected:", "if digest!=expected:  # a comment ruff would keep")
    for source in (_HELD, moved, reformatted):
        weakened = weaken(source, _GUARD)
        assert weakened.count("if False:") == 1 and "if digest" not in weakened


def test_a_guard_outside_its_holder_or_twice_in_it_is_not_found() -> None:
    elsewhere = _HELD.replace("    return a", "    if digest != expected:\n        pass")
    assert weaken(elsewhere, _GUARD).count("if digest != expected:") == 1  # the one in `unrelated` is left alone
    with pytest.raises(GuardNotFound, match="Keeper.check"):
        locate(_HELD.replace("Keeper", "Holder"), "Keeper.check", "if digest != expected:")
    twice = _HELD.replace("        return digest", "        if digest != expected:\n            pass")
    with pytest.raises(GuardNotFound, match="2 times in Keeper.check"):
        locate(twice, "Keeper.check", "if digest != expected:")


def weakened_checkout(guard: Guard, root: Path) -> Path:
    copy = root / "checkout"
    for name in ("src", "tests", "experiments"):
        shutil.copytree(REPO / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, copy / name)
    # tests that start rlaunch in a subprocess put only the checkout's root on PYTHONPATH
    (copy / "rlaunch").symlink_to(Path("src") / "rlaunch", target_is_directory=True)
    target = copy / guard.path
    target.write_text(weaken(target.read_text(encoding="utf-8"), guard), encoding="utf-8")
    return copy


@pytest.mark.promises
@pytest.mark.parametrize("item", GUARDS, ids=_guard_id)
def test_removing_a_guard_fails_its_tests(item: tuple[str, Guard], tmp_path: Path) -> None:
    promise, guard = item
    copy = weakened_checkout(guard, tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLAUNCH_")}
    env["PYTHONPATH"] = f"{copy / 'src'}{os.pathsep}{copy}"  # the copy, not this checkout's editable install
    # no plugins by entry point (xdist, Hypothesis's, anyio's): two seconds of start-up per guard, and
    # a guard's tests need none of them (Hypothesis's `@given` runs without its pytest plugin)
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rf", *guard.tests],
        cwd=copy, env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    failed = re.findall(r"^FAILED (\S+)", done.stdout, re.M)
    survived = [t for t in guard.tests if not any(f == t or f.startswith(t + "[") for f in failed)]
    assert done.returncode == 1 and not survived, (
        f"{promise}: with {guard.weakening} ({guard.path}), these tests still pass: {survived}\n{done.stdout[-3000:]}"
    )
