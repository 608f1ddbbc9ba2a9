"""An SFT step on the tiny smoke model, or one too big for its device.

    python -m tests.experiments.sft_warm --version 2026.12.07 --placement cpu [--run]   # trl-cpu, end to end
    python -m tests.experiments.sft_warm --version 2026.12.07 --placement l4            # a 14B model on 1 x L4: refused

`cpu` trains the smoke's tiny Qwen3 for two epochs on 24 arithmetic rows (2 CPU cores, seconds);
`l4` declares a Qwen3-14B (never built: the dry run refuses it before anything runs).
"""

from __future__ import annotations

from typing import Any

import click

from experiments import smoke
from rlaunch.artifacts import ArtifactStep, resolve_version
from rlaunch.cli import build_options
from rlaunch.skyrl import FromConfig, HfModel
from rlaunch.step_jobs import StepExecution
from rlaunch.training import SftSettings, sft_step
from tests.rules.test_memory import QWEN3_14B

SETTINGS = SftSettings(epochs=2, batch_size=8, micro_batch=4, lr=3e-3, max_length=64)


def never_built(config: dict[str, Any]) -> HfModel:
    raise AssertionError("the dry run refuses the SFT step before its base is built")


def big_model() -> ArtifactStep[HfModel]:
    return ArtifactStep(
        name="sft/qwen3-14b",
        version=resolve_version("sft/qwen3-14b", None),
        artifact_type=HfModel,
        run=never_built,
        build_config=lambda ctx: {"output_path": ctx.output_path, **FromConfig(QWEN3_14B).declaration(ctx)},
    )


@click.command()
@click.option("--placement", type=click.Choice(["cpu", "l4"]), required=True)
@build_options
def main(placement: str) -> ArtifactStep[HfModel]:
    data = smoke.dataset_step("sft/arithmetic", 4, {"train": 24}, 0)
    if placement == "cpu":
        model = smoke.model_step(smoke.tokenizer_step())
        return sft_step(model, data, name="sft/warm", settings=SETTINGS, execution=smoke.EVALUATION)
    gpu = StepExecution(runtime="fsdp", accelerators=1, accelerator_type="L4", memory="64GB")
    return sft_step(big_model(), data, name="sft/big", settings=SETTINGS, execution=gpu)


if __name__ == "__main__":
    main()
