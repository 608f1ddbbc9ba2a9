"""The CPU smoke trained with the experiment's own reward function instead of a built-in env class.

    python -m experiments.custom_reward --version 2026.11.30 --stage rl --run
    python -m experiments.custom_reward --version 2026.11.30 --reward experiments.rewards.arithmetic:exact_sum

The reward (`--reward module:function`, default `experiments.rewards.arithmetic:exact_sum`) is named in
the spec and its module is shipped with the run (`ExperimentCode`): the files' sha256 digest is in
the RL step's fingerprint (edit the reward and the plan shows a new fingerprint, so a new version),
the coordinator stores them under the prefix by that digest, and every task stages them and puts
them on the trainer's PYTHONPATH, where the trl-cpu trainer imports the function and scores every
completion with it. See docs/experiment_code.md.
"""

from __future__ import annotations

import click

from experiments import smoke
from rlaunch.artifacts import ArtifactStep
from rlaunch.cli import rl_build_options
from rlaunch.experiment_code import ExperimentCode

REWARD = "experiments.rewards.arithmetic:exact_sum"


@click.command()
@click.option("--stage", type=click.Choice(["rl", "evaluation"]), default="evaluation", show_default=True)
@click.option("--steps", type=click.IntRange(min=1), default=4, show_default=True, help="Optimizer steps.")
@click.option("--reward", default=REWARD, show_default=True, help="The reward function, module:function.")
@rl_build_options
def main(stage: str, steps: int, reward: str) -> ArtifactStep:
    data = smoke.dataset_step()
    code = ExperimentCode(modules=(reward.partition(":")[0],))  # a reward with helpers ships their package
    rl = smoke.rl_step(
        smoke.model_step(smoke.tokenizer_step()), data, 1, steps, name="custom-reward/rl", code=code, reward=reward
    )
    return rl if stage == "rl" else smoke.evaluation_step(rl, data, name="custom-reward/eval")


if __name__ == "__main__":
    main()
