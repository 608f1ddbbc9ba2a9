"""Rules over the models beside the policy: the reference, which SkyRL builds only for a KL term
(in the loss or the reward), and the critic, which the role plan has for GAE (`SkyRLCriticPlan`).

The reference's and the policy's parallel sizes are judged with the strategy's rules
(`rlaunch.rules.batches`); what is here is what SkyRL 0.4.0's `validate_cfg` checks about these
roles beyond their sizes, each refused exactly where SkyRL refuses it. The critic's placement and
batch rules are SkyRL's too: `validate_batch_sizes` for its mini batch (the policy's rules over the
critic's data-parallel size), `build_models` for its GPUs (colocated: the policy's count; refused
there only after the allocation). Dedicated, it takes whole nodes, as the policy does. SkyRL 0.4.0
places no reward model (rewards come from the environment), so there is no such role.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.geometry import Geometry
from rlaunch.launch_config.recipe_keys import ENGINE, ROLE, role_key
from rlaunch.rules.subject import Subject, Violation, violation

CODES = ("recipe.critic_sequence_parallel", "recipe.language_model_only", "role_plan.critic_placement", "batch.critic")

POLICY_LANGUAGE_MODEL_ONLY = role_key("policy", ROLE.LANGUAGE_MODEL_ONLY)


def role_rules(geo: Geometry, composed: Mapping[str, Any]) -> list[Violation]:
    out = []
    critic_sp = get_path(composed, role_key("critic", ROLE.SEQUENCE_PARALLEL_SIZE), 1)
    if critic_sp == 0:
        # `validate_batch_sizes` computes critic_world // critic.sequence_parallel_size whether or
        # not a critic is built: a ZeroDivisionError while validating.
        out.append(
            violation(
                "recipe.critic_sequence_parallel",
                ["config_yaml.trainer.critic.sequence_parallel_size"],
                "trainer.critic.sequence_parallel_size=0: SkyRL divides the critic's world size by it while "
                "validating, whether or not the role plan has a critic",
                "remove trainer.critic.sequence_parallel_size or set it to a positive divisor of the critic's GPUs",
                value=critic_sp,
            )
        )
    if get_path(composed, POLICY_LANGUAGE_MODEL_ONLY, False):
        followers = [ENGINE.LANGUAGE_MODEL_ONLY] + (
            [role_key("ref", ROLE.LANGUAGE_MODEL_ONLY)] if geo.use_reference else []
        )
        lacking = [key for key in followers if not get_path(composed, key, False)]
        if lacking:
            out.append(
                violation(
                    "recipe.language_model_only",
                    [f"config_yaml.{key}" for key in lacking],
                    f"trainer.policy.language_model_only is true but {' and '.join(lacking)} "
                    f"{'is' if len(lacking) == 1 else 'are'} not: SkyRL requires the inference engines, and the "
                    "reference when a KL term builds it, to load the language model alone as well",
                    f"set {' and '.join(f'{key}: true' for key in lacking)}, or trainer.policy.language_model_only: false",
                    lacking=lacking,
                )
            )
    return out


def critic_rules(s: Subject, geo: Geometry) -> list[Violation]:
    """The critic's placement and batches (see the module docstring); [] without a critic."""
    if not geo.use_critic:
        return []
    fields = ["role_plan.critic.num_nodes", "role_plan.critic.num_gpus_per_node"]
    if geo.colocate_all and geo.critic_world != geo.policy_world:
        return [
            violation(
                "role_plan.critic_placement",
                fields,
                f"with colocate_all the critic shares the policy's GPUs, but it plans {geo.critic_nodes} x "
                f"{geo.critic_gpus_per_node} = {geo.critic_world} and the policy {geo.policy_world}: SkyRL refuses it "
                "while building the models, after the GPUs are allocated",
                f"set the critic to num_nodes={geo.policy_nodes}, num_gpus_per_node={geo.policy_gpus_per_node}",
                critic=geo.critic_world,
                policy=geo.policy_world,
            )
        ]
    if not geo.colocate_all and geo.critic_gpus_per_node != s.gpus_per_node:
        return [
            violation(
                "role_plan.critic_placement",
                fields,
                f"a critic that is not colocated takes whole nodes of its own, but it plans "
                f"num_gpus_per_node={geo.critic_gpus_per_node} on nodes of {s.gpus_per_node}",
                f"set the critic's num_gpus_per_node={s.gpus_per_node} (and count its nodes in topology.num_nodes)",
                critic_gpus_per_node=geo.critic_gpus_per_node,
                gpus_per_node=s.gpus_per_node,
            )
        ]
    return _critic_batches(geo)


def _critic_batches(geo: Geometry) -> list[Violation]:
    """SkyRL's critic batch checks, in its order; the first that fails is the one it reports."""
    dp, train, mini, n, micro = geo.critic_dp, geo.train_batch, geo.critic_mini_batch, geo.n_samples, geo.micro_batch
    if dp is None or micro <= 0:
        return []  # the critic's sequence parallelism or the micro batch is refused by its own rule
    per_gpu_mini = mini * n // dp
    per_gpu_train = train * n // dp
    fields = ["role_plan.critic.mini_batch_size", "role_plan.train_batch_size"]
    if mini > train or train % mini:
        problem = f"train_batch_size={train} must be a multiple of the critic's mini_batch_size={mini}"
    elif per_gpu_mini <= 0:
        problem = f"the critic's per-GPU mini batch {mini}*{n}//{dp} is 0 (critic data parallelism {dp})"
    elif per_gpu_mini % micro:
        problem = f"the critic's per-GPU mini batch {mini}*{n}//{dp}={per_gpu_mini} is not divisible by the micro batch {micro}"
        fields.append("role_plan.micro_train_batch_size_per_gpu")
    elif per_gpu_train % per_gpu_mini:
        problem = (
            f"the critic's per-GPU train batch {train}*{n}//{dp}={per_gpu_train} is not divisible by its per-GPU "
            f"mini batch {per_gpu_mini}"
        )
    else:
        return []
    return [
        violation(
            "batch.critic",
            fields,
            f"{problem}: SkyRL's validate_cfg refuses it",
            "make the critic's mini_batch_size divide train_batch_size and its mini batch x n_samples_per_prompt a "
            f"multiple of the critic's data-parallel size {dp} x micro_train_batch_size_per_gpu {micro}",
            train=train,
            critic_mini=mini,
            critic_dp=dp,
            micro=micro,
        )
    ]
