"""The runtime registry as a test found it, put back after the test loaded plugin runtimes."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from rlaunch.runtimes import registry


@contextlib.contextmanager
def isolated_runtime_registry() -> Iterator[None]:
    profiles, plugins = dict(registry._registry), list(registry._plugins_loaded)
    modules = set(sys.modules)
    try:
        yield
    finally:
        registry._registry.clear()
        registry._registry.update(profiles)
        registry._plugins_loaded[:] = plugins
        for name in set(sys.modules) - modules:
            if name.startswith("tests.plugins"):
                del sys.modules[name]
