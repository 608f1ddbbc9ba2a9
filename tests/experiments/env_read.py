"""The marker RL step whose graph reads the environment while it is built: its training steps come
from $MARKER_TRAINING_STEPS (4 when unset), a variable no coordinator is given. Submitted with it
set, the coordinator's replay builds another graph than the one judged, and refuses to train it.

    MARKER_TRAINING_STEPS=6 python -m tests.experiments.env_read --version 2026.11.30 --run [--backend ray]
"""

from __future__ import annotations

import os

import click

from rlaunch.artifacts import ArtifactStep
from rlaunch.cli import rl_build_options
from tests.experiments.marker import marker_rl

STEPS_ENV = "MARKER_TRAINING_STEPS"


@click.command()
@click.option("--backend", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@rl_build_options
def main(backend: str) -> ArtifactStep:
    return marker_rl(backend=backend, steps=int(os.environ.get(STEPS_ENV, "4")))


if __name__ == "__main__":
    main()
