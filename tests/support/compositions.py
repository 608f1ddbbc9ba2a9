"""Each recipe composition (by the profile that composed it) and each geometry built while a test
runs: what a launch planned once composes and builds once."""

from __future__ import annotations

from typing import Any

import pytest

from rlaunch.launch_config.geometry import Geometry
from rlaunch.runtimes.registry import RuntimeProfile


def counted_compositions(monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], list[str]]:
    """The profiles' names composed and the geometries built, appended to as they happen."""
    composed: list[str] = []
    geometries: list[str] = []
    real_compose, real_geometry = RuntimeProfile.compose, Geometry.from_recipe.__func__  # type: ignore[attr-defined]

    def compose(self: RuntimeProfile, recipe: Any) -> Any:
        composed.append(self.name)
        return real_compose(self, recipe)

    def geometry(cls: type[Geometry], recipe: Any) -> Geometry:
        geometries.append(cls.__name__)
        return real_geometry(cls, recipe)

    monkeypatch.setattr(RuntimeProfile, "compose", compose)
    monkeypatch.setattr(Geometry, "from_recipe", classmethod(geometry))
    return composed, geometries
