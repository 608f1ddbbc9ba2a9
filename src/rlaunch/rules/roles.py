"""Rules over the models beside the policy: the reference, which SkyRL builds only for a KL term
(in the loss or the reward), and the critic, which the role plan never has.

The reference's and the policy's parallel sizes are judged with the strategy's rules
(`rlaunch.rules.batches`); what is here is what SkyRL 0.4.0's `validate_cfg` checks about these
roles beyond their sizes, each refused exactly where SkyRL refuses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules.subject import Violation, violation

CODES = ("recipe.critic_sequence_parallel", "recipe.language_model_only")

LANGUAGE_MODEL_ONLY = "language_model_only"


def role_rules(geo: Geometry, composed: Mapping[str, Any]) -> list[Violation]:
    out = []
    critic_sp = get_path(composed, "trainer.critic.sequence_parallel_size", 1)
    if critic_sp == 0:
        # `validate_batch_sizes` computes critic_world // critic.sequence_parallel_size whether or
        # not a critic is built: a ZeroDivisionError while validating.
        out.append(
            violation(
                "recipe.critic_sequence_parallel",
                ["config_yaml.trainer.critic.sequence_parallel_size"],
                "trainer.critic.sequence_parallel_size=0: SkyRL divides the critic's world size by it while "
                "validating, even though the role plan has no critic",
                "remove trainer.critic.sequence_parallel_size (the role plan has no critic) or set it to 1",
                value=critic_sp,
            )
        )
    if get_path(composed, f"trainer.policy.{LANGUAGE_MODEL_ONLY}", False):
        followers = ["generator.inference_engine"] + (["trainer.ref"] if geo.use_reference else [])
        lacking = [f"{role}.{LANGUAGE_MODEL_ONLY}" for role in followers]
        lacking = [key for key in lacking if not get_path(composed, key, False)]
        if lacking:
            out.append(
                violation(
                    "recipe.language_model_only",
                    [f"config_yaml.{key}" for key in lacking],
                    f"trainer.policy.{LANGUAGE_MODEL_ONLY} is true but {' and '.join(lacking)} "
                    f"{'is' if len(lacking) == 1 else 'are'} not: SkyRL requires the inference engines, and the "
                    "reference when a KL term builds it, to load the language model alone as well",
                    f"set {' and '.join(f'{key}: true' for key in lacking)}, or trainer.policy.{LANGUAGE_MODEL_ONLY}: false",
                    lacking=lacking,
                )
            )
    return out
