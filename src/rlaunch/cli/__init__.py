"""Command-line entry points: the experiment decorators and the `rlaunch` admin command."""

from __future__ import annotations

from typing import Any

from rlaunch.cli.experiment import build_options

__all__ = ["build_options", "rl_build_options"]


def __getattr__(name: str) -> Any:
    if name == "rl_build_options":
        from rlaunch.cli.rl_options import rl_build_options

        return rl_build_options
    raise AttributeError(name)
