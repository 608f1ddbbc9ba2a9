"""A larger marker run gated on the marker smoke (`marker/rl`): the smoke gate, end to end.

    python -m tests.experiments.gated --version 2026.11.30 [--mismatch export|resume] --run [--skip-smoke-gate REASON]

The smoke is `marker/rl` at the run-wide version (or `--override marker/rl=VERSION`); the large
run `gated/rl` doubles the batch and adds steps (scale), and `--mismatch` breaks parity on purpose.
"""

from __future__ import annotations

import click

from rlaunch.artifacts import ArtifactStep
from rlaunch.cli import rl_build_options
from tests.experiments.marker import marker_rl


@click.command()
@click.option("--mismatch", type=click.Choice(["none", "export", "resume"]), default="none", show_default=True)
@rl_build_options
def main(mismatch: str) -> ArtifactStep:
    smoke = marker_rl()
    return marker_rl(
        "gated/rl",
        steps=6,
        train_batch=4,
        export=mismatch != "export",
        resume_mode="none" if mismatch == "resume" else "latest",
        smoke=smoke,
    )


if __name__ == "__main__":
    main()
