"""Load a script that is not a package module (a benchmark) by its path, so tests
can call its functions without running its command line."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load(relative: str, name: str) -> ModuleType:
    """`REPO/relative` as module `name`. It is in `sys.modules` while it runs (dataclasses look their
    module up while a class is made) and stays there, so its classes pickle and compare by module."""
    spec = importlib.util.spec_from_file_location(name, REPO / relative)
    assert spec is not None and spec.loader is not None, relative
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
