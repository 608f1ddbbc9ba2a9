"""A larger trl-cpu run with the CPU smoke's shape, gated on that smoke.

    python -m experiments.cpu_scaled --version 2026.11.30                 # plan: readiness, smoke gate
    python -m experiments.smoke --version 2026.11.30 --stage rl --run     # the smoke it declares
    python -m experiments.cpu_scaled --version 2026.11.30 --run           # goes only after the smoke passes

The same tokenizer, model and data artifacts, runtime, strategy, entrypoint, role geometry and
checkpoint/export policy as `experiments.smoke`; twice the prompts per step and twice the steps.
`--run` is refused until `smoke/rl` at the same version passes verify-smoke and parity holds
(`--skip-smoke-gate "<reason>"` overrides it and keeps the reason in the run record).
"""

from __future__ import annotations

import click

from experiments import smoke
from rlaunch.cli import rl_build_options
from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep


def scaled_step(slots: int = 1, backend: str = "local") -> SkyRLArtifactStep:
    model, data = smoke.model_step(smoke.tokenizer_step()), smoke.dataset_step()
    rehearsal = smoke.rl_step(model, data, slots, steps=4, backend=backend)
    return smoke.rl_step(model, data, slots, steps=8, backend=backend, name="scaled/rl", train_batch=8, smoke=rehearsal)


@click.command()
@click.option("--backend", type=click.Choice(["local", "ray"]), default="local", show_default=True)
@click.option("--slots", type=click.IntRange(1, 2), default=1, show_default=True, help="CPU device slots.")
@rl_build_options
def main(backend: str, slots: int) -> SkyRLArtifactStep:
    return scaled_step(slots, backend)


if __name__ == "__main__":
    main()
