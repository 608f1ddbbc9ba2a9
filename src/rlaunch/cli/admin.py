"""The `rlaunch` command: the launch host, cluster jobs, and read-only views of runs.

Subcommands are imported only when invoked, so `rlaunch --help` stays fast and never loads a
backend or a trainer.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

# subcommand name -> "module:attribute" of a click command
SUBCOMMANDS: dict[str, str] = {
    "launch": "rlaunch.host.cli:launch",
    "jobs": "rlaunch.cli.jobs:jobs",
    "runs": "rlaunch.observe.cli:runs",
    "status": "rlaunch.control.cli:status",
    "verify-smoke": "rlaunch.observe.cli:verify_smoke",
    "logs": "rlaunch.observe.cli:logs",
    "cancel": "rlaunch.control.cli:cancel",
    "plot": "rlaunch.observe.cli:plot",
    "compare": "rlaunch.observe.cli:compare",
    "parity": "rlaunch.cli.parity_command:parity",
    "fit": "rlaunch.cli.fit_command:fit",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, _, attr = target.partition(":")
        command: click.Command = getattr(importlib.import_module(module_name), attr)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        """Every subcommand runs inside the one error boundary (no bare tracebacks)."""
        from rlaunch.boundary import error_boundary
        from rlaunch.secrets import refuse_secret_arguments

        with error_boundary("rlaunch"):
            refuse_secret_arguments([*getattr(ctx, "_protected_args", []), *ctx.args])  # e.g. a --reason is recorded
            return super().invoke(ctx)


@click.group(cls=LazyGroup)
@click.version_option(package_name="rlaunch")
def main() -> None:
    """Launch RL post-training runs and inspect what they recorded."""
