"""The role plan's critic against SkyRL 0.4.0 itself: what `check_plan` accepts, SkyRL's parser and
`validate_cfg` accept (the critic built from the policy's model, on the planned placement and mini
batch), and what SkyRL refuses, `check_plan` refuses with the critic's own rule. The one launcher
rule (a colocated critic on fewer GPUs than the policy) is SkyRL's own assertion in `build_models`,
after the allocation.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from rlaunch.launch_config.composition import set_path
from rlaunch.launch_config.geometry import CRITIC_MODEL_KEY
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl.values.config_yaml import render_recipe
from rlaunch.skyrl.values.role_plan import SkyRLCriticPlan, SkyRLRolePlan

from .test_differential import rlaunch_verdict, skyrl_refusal

pytestmark = pytest.mark.skyrl

RECIPE: dict[str, Any] = {
    "trainer": {
        "logger": "console",
        "project_name": "critic",
        "max_prompt_length": 512,
        "ckpt_interval": 10,
        "hf_save_interval": -1,
        "resume_mode": "latest",
        "algorithm": {"advantage_estimator": "gae", "use_kl_loss": False},
    },
    "generator": {"sampling_params": {"max_generate_length": 1024}},
}
# 1 node x 8 GPUs, colocated, 8 engines: 64 prompts x 8 samples, mini 32, micro 2.
PLAN: dict[str, Any] = dict(
    colocate_all=True, policy_num_nodes=1, policy_num_gpus_per_node=8, num_inference_engines=8,
    inference_engine_tensor_parallel_size=1, inference_engine_pipeline_parallel_size=1,
    inference_engine_data_parallel_size=1, inference_engine_expert_parallel_size=1,
    train_batch_size=64, policy_mini_batch_size=32, micro_train_batch_size_per_gpu=2, n_samples_per_prompt=8,
)  # fmt: skip


def case(critic: SkyRLCriticPlan | None, *, strategy: str = "fsdp", nodes: int = 1, **plan: Any) -> dict[str, Any]:
    return {"plan": PLAN | plan | {"critic": critic}, "recipe": RECIPE, "strategy": strategy, "nodes": nodes, "gpus": 8}


def verdicts(c: dict[str, Any]) -> tuple[list[str], str | None]:
    found, composed = rlaunch_verdict(c)
    assert composed is not None
    return sorted({code for code, _ in found}), skyrl_refusal(composed, c["strategy"])


@pytest.mark.parametrize(
    "c",
    [
        case(SkyRLCriticPlan(1, 8, 32)),  # colocated, the policy's GPUs
        case(SkyRLCriticPlan(1, 8, 64)),  # mini = train
        case(SkyRLCriticPlan(1, 8, 16), colocate_all=False, num_inference_engines=1,
             inference_engine_data_parallel_size=8, nodes=3),  # a node each: policy, engines, critic
    ],
    ids=["colocated", "mini-equals-train", "dedicated"],
)  # fmt: skip
def test_a_critic_check_plan_accepts_is_built_by_skyrl_as_planned(c: dict[str, Any]) -> None:
    from rlaunch_skyrl.driver import config

    assert verdicts(c) == ([], None)
    profile = get_profile("fsdp")
    plan, critic = c["plan"], c["plan"]["critic"]
    composed, _ = profile.compose(render_recipe(RECIPE, SkyRLRolePlan(**plan), profile, 3))
    set_path(composed, CRITIC_MODEL_KEY, "/models/policy")  # the host's injection of the policy's model
    for key, value in (("trainer.policy.model.path", "/models/policy"), ("trainer.ref.model.path", "/models/policy"),
                       ("data.train_data", ["/data/train.parquet"]), ("data.val_data", [])):  # fmt: skip
        set_path(composed, key, value)
    cfg = config({"skyrl": composed, "run": {"export_hf": False}})
    assert cfg.trainer.critic.model.path == "/models/policy" == cfg.trainer.policy.model.path
    placement = cfg.trainer.placement
    assert (placement.critic_num_nodes, placement.critic_num_gpus_per_node) == (
        critic.num_nodes,
        critic.num_gpus_per_node,
    )
    assert cfg.trainer.critic_mini_batch_size == critic.mini_batch_size
    assert cfg.trainer.algorithm.advantage_estimator == "gae"


@pytest.mark.parametrize(
    ("c", "code", "needle"),
    [
        (case(None), "recipe.gae_needs_critic", "trainer.critic.model.path"),
        (case(SkyRLCriticPlan(1, 8, 48)), "batch.critic", "critic_mini_batch_size"),
        (case(SkyRLCriticPlan(1, 8, 1)), "batch.critic", "critic_mini_batch_size_per_gpu"),
        (case(SkyRLCriticPlan(1, 8, 128)), "batch.critic", ""),  # SkyRL: a bare assert train >= critic mini
        (case(SkyRLCriticPlan(1, 8, 32), strategy="megatron"), "recipe.critic", "only GRPO"),
    ],
    ids=["gae-without-critic", "mini-not-dividing-train", "per-gpu-mini-vs-micro", "mini-above-train", "megatron"],
)
def test_what_skyrl_refuses_about_a_critic_check_plan_refuses_by_the_critics_rule(
    c: dict[str, Any], code: str, needle: str
) -> None:
    codes, refusal = verdicts(c)
    assert refusal is not None and needle in refusal, refusal
    assert code in codes, codes


def test_a_colocated_critic_on_other_gpus_passes_validate_cfg_but_fails_in_build_models() -> None:
    from skyrl.train.trainer import RayPPOTrainer

    codes, refusal = verdicts(case(SkyRLCriticPlan(1, 4, 16)))
    assert refusal is None and codes == ["role_plan.critic_placement"]
    assert "num_policy_gpus == num_critic_gpus" in inspect.getsource(RayPPOTrainer.build_models)


def test_skyrl_0_4_0_places_no_reward_model() -> None:
    """Rewards come from the environment: there is no reward-model role to plan (nor a key for one)."""
    from skyrl.train.config import SkyRLTrainConfig

    from rlaunch.launch_config.composition import leaves

    keys = [path for path, _ in leaves(get_profile("fsdp").base_config())]
    assert not [k for k in keys if "reward_model" in k or k.startswith("trainer.placement.reward")]
    assert not hasattr(SkyRLTrainConfig().trainer.placement, "reward_num_nodes")
