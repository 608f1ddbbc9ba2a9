"""Every rule's verdict in full: the code, the field paths, the numbers and the text a user reads.

One plan per verdict (and one per variant of its wording), each changing the number or setting the
rule is about. The expected violations are written out whole in `verdicts.yaml` (line and values),
so a rule that names the wrong field, drops a value, or loses the fix (what a researcher reads to
repair the plan) fails here, in the preflight and so in the launch host, which applies the same
rules.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rlaunch.rules import MAX_SIZE
from rlaunch.skyrl import ModelFacts, SkyRLCriticPlan, SkyRLTopology
from tests.support.specs import (
    WANDB_RECIPE,
    cpu_plan,
    cpu_topology,
    merge,
    plan,
    recipe,
    seed_plan,
    seed_topology,
    topology,
)

from .helpers import DISAGGREGATED_ONLY, NARROW, OPEN_DEFECT, Case, colocated, fully_async, megatron, seed, verdict

# A colocated critic on the small plan's 8 GPUs, and the GAE recipe that needs it.
CRITIC = SkyRLCriticPlan(num_nodes=1, num_gpus_per_node=8, mini_batch_size=32)
GAE = recipe(trainer={"algorithm": {"advantage_estimator": "gae", "use_kl_loss": False}})

EXPECTED = yaml.safe_load((Path(__file__).parent / "verdicts.yaml").read_text(encoding="utf-8"))

# case id (the code, "#n" for a second wording; "explicit": every explicit.* code) -> the plan
CASES: dict[str, Case] = {
    "topology.non_positive": Case(topology(num_nodes=0, gpus_per_node=-1)),
    "topology.too_large": Case(topology(num_nodes=MAX_SIZE + 1), recipe(trainer={"ckpt_path": "/elsewhere"})),
    "role_plan.non_positive": colocated(n_samples_per_prompt=0, inference_engine_expert_parallel_size=-3),
    "role_plan.too_large": seed(train_batch_size=-(MAX_SIZE + 1)),
    "role_plan.policy_nodes_exceed_topology": Case(
        topology(plan(policy_num_nodes=3, num_inference_engines=24), num_nodes=2)
    ),
    "role_plan.policy_gpus_exceed_node": seed(policy_num_gpus_per_node=9),
    "role_plan.policy_width_mismatch": seed(policy_num_gpus_per_node=7),
    "engine.colocated_slice": colocated(
        num_inference_engines=1, inference_engine_tensor_parallel_size=3, inference_engine_pipeline_parallel_size=2
    ),
    "engine.colocated_slice #2": colocated(  # no TP fills an 8-GPU node beside PP 3: the PP is the fix
        num_inference_engines=1, inference_engine_pipeline_parallel_size=3
    ),
    "engine.colocated_gpu_mismatch": colocated(
        num_inference_engines=2, inference_engine_tensor_parallel_size=2, inference_engine_data_parallel_size=3
    ),
    "engine.exceeds_node": Case(
        SkyRLTopology(
            8,
            8,
            "H100",
            seed_plan(
                num_inference_engines=1,
                inference_engine_tensor_parallel_size=2,
                inference_engine_pipeline_parallel_size=3,
                inference_engine_data_parallel_size=2,
            ),
        )
    ),
    "engine.rollout_packing": Case(
        SkyRLTopology(
            8,
            6,
            "H100",
            seed_plan(
                policy_num_gpus_per_node=6,
                num_inference_engines=6,
                inference_engine_data_parallel_size=4,
                train_batch_size=48,
                policy_mini_batch_size=24,
            ),
        )
    ),
    "engine.expert_parallel": seed(
        inference_engine_expert_parallel_size=3,
        inference_engine_tensor_parallel_size=2,
        inference_engine_data_parallel_size=4,
    ),
    "engine.expert_parallel_skyrl": seed(inference_engine_expert_parallel_size=4),
    "topology.gpu_budget": seed(num_inference_engines=3),
    "topology.gpu_budget #2": Case(topology(num_nodes=2)),
    "topology.gpu_variant_ambiguous": Case(topology(gpu_variant="A100")),
    "batch.train_mini": seed(train_batch_size=324),
    "batch.train_mini #2": colocated(train_batch_size=72),  # odd mini batches break the micro batch of 2
    "batch.micro_forward": seed(recipe(trainer={"micro_forward_batch_size_per_gpu": -2})),
    "batch.per_gpu_mini_zero": seed(policy_mini_batch_size=4, micro_train_batch_size_per_gpu=1, n_samples_per_prompt=7),
    "batch.per_gpu_mini_micro": seed(micro_train_batch_size_per_gpu=32),
    "batch.per_gpu_train_mini": seed(train_batch_size=96),
    "batch.reference_lcm": seed(
        train_batch_size=4, policy_mini_batch_size=4, micro_train_batch_size_per_gpu=1, n_samples_per_prompt=7
    ),
    "batch.tail_stride": seed(train_batch_size=258, policy_mini_batch_size=2, micro_train_batch_size_per_gpu=1),
    "strategy.megatron_non_positive": seed(
        recipe(
            trainer={
                "policy": {"megatron_config": {"pipeline_model_parallel_size": 0}},
                "ref": {"megatron_config": {"expert_tensor_parallel_size": True}},
            }
        ),
        "megatron",
    ),
    "strategy.megatron_world": seed(
        megatron(tensor_model_parallel_size=3, pipeline_model_parallel_size=1, context_parallel_size=1), "megatron"
    ),
    # The reference (built: the base recipe's KL loss) against its own TP*PP*CP.
    "strategy.megatron_world #2": seed(
        recipe(trainer={"ref": {"megatron_config": {"tensor_model_parallel_size": 3}}}), "megatron"
    ),
    "strategy.megatron_expert": seed(
        megatron(pipeline_model_parallel_size=2, expert_model_parallel_size=32, expert_tensor_parallel_size=1),
        "megatron",
    ),
    "strategy.megatron_sequence_parallel": seed(recipe(trainer={"policy": {"sequence_parallel_size": 2}}), "megatron"),
    # Ulysses on the reference is refused under Megatron even when no reference is built (no KL).
    "strategy.megatron_sequence_parallel #2": seed(
        recipe(trainer={"algorithm": {"use_kl_loss": False}, "ref": {"sequence_parallel_size": 2}}), "megatron"
    ),
    "strategy.megatron_context_parallel": seed(
        recipe(
            trainer={
                "remove_microbatch_padding": False,
                "policy": {"megatron_config": {"context_parallel_size": 2}},
                "ref": {"megatron_config": {"context_parallel_size": 4}},
            }
        ),
        "megatron",
    ),
    # The reference's routing replay is refused with the fused router although no reference is built.
    "strategy.megatron_routing_replay": seed(
        recipe(
            trainer={
                "algorithm": {"use_kl_loss": False},
                "ref": {
                    "megatron_config": {
                        "moe_enable_routing_replay": True,
                        "transformer_config_kwargs": {
                            "moe_router_fusion": True,
                            "virtual_pipeline_model_parallel_size": 2,
                        },
                    }
                },
            }
        ),
        "megatron",
    ),
    "strategy.megatron_routing_replay #2": seed(
        recipe(trainer={"policy": {"megatron_config": {"moe_enable_routing_replay": True}}}), "megatron"
    ),
    "strategy.megatron_routing_replay #3": seed(
        recipe(generator={"inference_engine": {"enable_return_routed_experts": True}})
    ),
    # The top-level FP8 fields fold into the transformer kwargs unless those name them.
    "strategy.megatron_fp8": seed(
        recipe(
            trainer={
                "ref": {"megatron_config": {"fp8_param": True, "transformer_config_kwargs": {"fp8_recipe": "MXFP8"}}}
            }
        ),
        "megatron",
    ),
    "strategy.megatron_fp8 #2": seed(
        recipe(trainer={"policy": {"megatron_config": {"fp8_param": True, "fp8_recipe": "blockwise"}}}), "megatron"
    ),
    "strategy.sequence_parallel": seed(
        recipe(trainer={"policy": {"sequence_parallel_size": 3}, "ref": {"sequence_parallel_size": 0}})
    ),
    "entrypoint.unknown": seed(recipe(entrypoint="async")),
    "entrypoint.fully_async_enabled": seed(recipe(trainer={"fully_async": {"enabled": True}})),
    "entrypoint.fully_async_batch": seed(fully_async(), train_batch_size=128),
    "entrypoint.fully_async_colocated": Case(topology(plan(train_batch_size=32)), fully_async(32)),
    "entrypoint.fully_async_workers": seed(fully_async(321), train_batch_size=64),
    "entrypoint.fully_async_policy_loss": seed(
        fully_async(algorithm={"policy_loss_type": "regular"}), train_batch_size=64
    ),
    "entrypoint.fully_async_batched": seed(merge(fully_async(), {"generator": {"batched": True}}), train_batch_size=64),
    "runtime.strategy_mismatch": seed(recipe(trainer={"strategy": "megatron"})),
    "runtime.accelerator": Case(cpu_topology(gpu_variant="H100"), profile="trl-cpu"),
    "runtime.accelerator #2": Case(SkyRLTopology(8, 8, "CPU", seed_plan())),
    "runtime.capability": Case(cpu_topology(cpu_plan(colocate_all=False), num_nodes=2), profile="trl-cpu"),
    "runtime.capability #2": Case(topology(), profile=DISAGGREGATED_ONLY),
    "runtime.capability #3": Case(
        topology(
            plan(
                num_inference_engines=1,
                inference_engine_tensor_parallel_size=4,
                inference_engine_pipeline_parallel_size=4,
            )
        ),
        profile=NARROW,
    ),
    "runtime.unsupported_setting": Case(
        cpu_topology(), recipe(trainer={"algorithm": {"kl_estimator_type": "k1"}}), profile="trl-cpu"
    ),
    "recipe.unknown_key": seed(recipe(trainer={"no_such_key": 1})),
    "recipe.type_mismatch": seed(recipe(trainer={"max_prompt_length": "long"})),
    "recipe.disagrees_with_plan": seed(recipe(trainer={"train_batch_size": 256.0, "seed": 18})),
    "recipe.launcher_owned": seed(recipe(trainer={"ckpt_path": "/tmp/x"})),
    "explicit": seed({"trainer": {"logger": "console"}}),
    "explicit.wandb_project": seed(merge(WANDB_RECIPE, {"trainer": {"project_name": None}})),
    "recipe.critic": seed(recipe(trainer={"critic": {"model": {"path": "/m"}}})),
    "recipe.critic #2": Case(topology(plan(critic=CRITIC)), GAE, "megatron"),
    "recipe.kl_exclusive": seed(recipe(trainer={"algorithm": {"use_kl_in_reward": True}})),
    "recipe.gae_needs_critic": seed(recipe(trainer={"algorithm": {"advantage_estimator": "gae"}})),
    "recipe.critic_sequence_parallel": seed(recipe(trainer={"critic": {"sequence_parallel_size": 0}})),
    "role_plan.critic_placement": Case(topology(plan(critic=SkyRLCriticPlan(1, 4, 32))), GAE),
    "role_plan.critic_placement #2": Case(topology(seed_plan(critic=SkyRLCriticPlan(2, 4, 64)), num_nodes=9), GAE),
    "batch.critic": Case(topology(plan(critic=SkyRLCriticPlan(1, 8, 48))), GAE),
    "batch.critic #2": Case(topology(plan(critic=SkyRLCriticPlan(1, 8, 1))), GAE),
    # The reference is built (the base recipe's KL loss): it must load the language model alone too.
    "recipe.language_model_only": seed(recipe(trainer={"policy": {"language_model_only": True}})),
    "recipe.language_model_only #2": seed(
        recipe(
            trainer={"algorithm": {"use_kl_loss": False}, "policy": {"language_model_only": True}},
            generator={"inference_engine": {"language_model_only": False}},
        )
    ),
    "recipe.max_training_steps": seed(recipe(trainer={"max_training_steps": 2.5})),
    "recipe.resume_mode": seed(recipe(trainer={"resume_mode": "from_path"})),
    "recipe.input_length": seed(recipe(generator={"max_turns": 1, "max_input_length": 1025})),
    "recipe.input_length #2": seed(recipe(generator={"max_turns": 3, "max_input_length": 1023})),
    "recipe.prefill_decode": seed(recipe(generator={"inference_engine": {"enable_pd": True, "num_prefill": 4}})),
    "recipe.external_engines": seed(recipe(generator={"inference_engine": {"external_proxy_url": "http://x"}})),
    "recipe.external_engines #2": seed(recipe(generator={"inference_engine": {"external_server_urls": ["http://x"]}})),
    "recipe.executor_backend": seed(recipe(generator={"inference_engine": {"distributed_executor_backend": "slurm"}})),
    "model.tp_heads": Case(
        seed_topology(inference_engine_tensor_parallel_size=8, inference_engine_data_parallel_size=1),
        model=ModelFacts(12, None),
    ),
    "model.context_budget": Case(seed_topology(), model=ModelFacts(None, 4095)),
    "model.revision_mismatch": Case(
        seed_topology(), model=ModelFacts(None, None, revision="a" * 40, tokenizer_revision="b" * 40)
    ),
    "defect.open": seed(
        None, OPEN_DEFECT, train_batch_size=258, policy_mini_batch_size=2, micro_train_batch_size_per_gpu=1
    ),
}


def test_every_case_has_its_verdict_written_out() -> None:
    assert list(CASES) == list(EXPECTED)


@pytest.mark.parametrize("name", list(CASES))
def test_each_rule_names_its_fields_numbers_and_fix(name: str) -> None:
    code = name.split(" #")[0]
    found = [
        v for v in verdict(CASES[name]) if v.code == code or (code == "explicit" and v.code.startswith("explicit."))
    ]
    assert [{"line": v.line(), "values": dict(v.values)} for v in found] == EXPECTED[name]
