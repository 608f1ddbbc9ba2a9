"""A working tree holding an experiment package (`shipexp`) for the tests of shipped code
(`rlaunch.experiment_code`): the current directory and first on the import path while a test runs."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REWARDS = "def exact(completion, truth):\n    return float(completion == truth)\n"
FILES = {
    "shipexp/__init__.py": "",
    "shipexp/rewards.py": REWARDS,
    "shipexp/helpers/__init__.py": "",
    "shipexp/helpers/maths.py": "TWO = 2\n",
    "shipexp/helpers/__pycache__/maths.cpython-311.pyc": "stale",
    "shipexp/README.md": "not code\n",
}


def experiment_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """`tmp_path/work` holding `FILES`, the working directory and on the path; `shipexp` is forgotten after."""
    work = tmp_path / "work"
    for rel, text in FILES.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(work))
    yield work
    for name in [m for m in sys.modules if m == "shipexp" or m.startswith("shipexp.")]:
        del sys.modules[name]
