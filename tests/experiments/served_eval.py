"""The marker RL run with an evaluation downstream: only what launches is judged, end to end.

    python -m tests.experiments.served_eval --version 2026.11.30 --stage rl|evaluation [--run]

Once `marker/rl` is built it is served: a changed runtime (attempts and checkpoints under another
digest) must not gate the evaluation that reads it, and its plan says it does not resume.
"""

from __future__ import annotations

from typing import Any

import click

from rlaunch import storage
from rlaunch.artifacts import Artifact, ArtifactStep, resolve_version
from rlaunch.cli import rl_build_options
from tests.experiments.marker import marker_rl


def write_report(config: dict[str, Any]) -> Artifact:
    """A stand-in evaluation: it reads where the RL run is and writes one report."""
    storage.write_json_atomic(storage.join(config["output_path"], "report.json"), {"policy": config["policy"]})
    return Artifact(path=config["output_path"])


def evaluation(rl: ArtifactStep) -> ArtifactStep:
    return ArtifactStep(
        name="marker/eval",
        version=resolve_version("marker/eval", None),
        artifact_type=Artifact,
        run=write_report,
        build_config=lambda ctx: {"output_path": ctx.output_path, "policy": ctx.artifact_path(rl)},
        deps=(rl,),
    )


@click.command()
@click.option("--stage", type=click.Choice(["rl", "evaluation"]), required=True)
@rl_build_options
def main(stage: str) -> ArtifactStep:
    rl = marker_rl()
    return rl if stage == "rl" else evaluation(rl)


if __name__ == "__main__":
    main()
