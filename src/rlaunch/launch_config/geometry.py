"""The one geometry: every number derived from a role plan rendered into a composed recipe.

GPUs by role, engine sizes, engines per node, rollout nodes, physical nodes, data-parallel sizes,
per-device batches, gradient accumulation, optimizer steps per training step and SkyRL's tail
stride are computed here and nowhere else. The rules (`rlaunch.rules`, applied by the preflight
and the launch host), the plan view and observe read them. Nothing here raises on a zero or
negative size: a number that cannot be derived is None, and the rules report why. The one copy is
forced by the adapter boundary: the trl-cpu adapter, which cannot import rlaunch, re-derives the
per-process numbers it hands TRL (`rlaunch_trl_cpu.recipe.translate`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.recipe_keys import (
    ALGORITHM,
    ASYNC_TRAINER,
    ENGINE,
    GENERATOR,
    PLACEMENT,
    ROLE,
    TRAINER,
    role_key,
)

FULLY_ASYNC = "fully_async"
# SkyRL's fully-async trainer asserts this flag; it follows the entrypoint, so rlaunch renders it.
FULLY_ASYNC_ENABLED_KEY = ASYNC_TRAINER.ENABLED

# Role-plan field -> the recipe key it is rendered into (SkyRL 0.4.0 key paths).
ROLE_PLAN_KEYS: dict[str, str] = {
    "colocate_all": PLACEMENT.COLOCATE_ALL,
    "policy_num_nodes": PLACEMENT.POLICY_NUM_NODES,
    "policy_num_gpus_per_node": PLACEMENT.POLICY_NUM_GPUS_PER_NODE,
    "num_inference_engines": ENGINE.NUM_ENGINES,
    "inference_engine_tensor_parallel_size": ENGINE.TENSOR_PARALLEL_SIZE,
    "inference_engine_pipeline_parallel_size": ENGINE.PIPELINE_PARALLEL_SIZE,
    "inference_engine_data_parallel_size": ENGINE.DATA_PARALLEL_SIZE,
    "inference_engine_expert_parallel_size": ENGINE.EXPERT_PARALLEL_SIZE,
    "train_batch_size": TRAINER.TRAIN_BATCH_SIZE,
    "policy_mini_batch_size": TRAINER.POLICY_MINI_BATCH_SIZE,
    "micro_train_batch_size_per_gpu": TRAINER.MICRO_TRAIN_BATCH_SIZE_PER_GPU,
    "n_samples_per_prompt": GENERATOR.N_SAMPLES_PER_PROMPT,
}


# The critic's plan field -> the recipe key it is rendered into (only when the role plan has a critic).
CRITIC_KEYS: dict[str, str] = {
    "num_nodes": PLACEMENT.CRITIC_NUM_NODES,
    "num_gpus_per_node": PLACEMENT.CRITIC_NUM_GPUS_PER_NODE,
    "mini_batch_size": TRAINER.CRITIC_MINI_BATCH_SIZE,
}
# SkyRL builds a critic exactly when this key is set. The role plan renders it as CRITIC_FROM_POLICY
# (the critic starts from the policy's model); the launch host replaces that with the staged model path.
CRITIC_MODEL_KEY = role_key("critic", ROLE.MODEL_PATH)
CRITIC_FROM_POLICY = "rlaunch:policy-model"


def rendered_plan(plan: Mapping[str, Any]) -> dict[str, Any]:
    """Every recipe key a role plan (field -> value) decides: its own twelve, plus the reference
    sharing the policy's GPUs and engines running inside the gang, and its critic's keys if it has one."""
    out = {key: plan[name] for name, key in ROLE_PLAN_KEYS.items()}
    out[PLACEMENT.COLOCATE_POLICY_REF] = True
    out[PLACEMENT.REF_NUM_NODES] = plan["policy_num_nodes"]
    out[PLACEMENT.REF_NUM_GPUS_PER_NODE] = plan["policy_num_gpus_per_node"]
    out[ENGINE.RUN_ENGINES_LOCALLY] = True
    critic = plan.get("critic")
    if critic:
        out.update({key: critic[name] for name, key in CRITIC_KEYS.items()})
        out[CRITIC_MODEL_KEY] = CRITIC_FROM_POLICY
    return out


def plan_values(recipe: Mapping[str, Any]) -> dict[str, Any]:
    """The role plan (field -> value) a composed recipe carries; `critic` is None without one."""
    out = {name: get_path(recipe, key) for name, key in ROLE_PLAN_KEYS.items()}
    has_critic = get_path(recipe, CRITIC_MODEL_KEY, None) == CRITIC_FROM_POLICY
    out["critic"] = {name: get_path(recipe, key) for name, key in CRITIC_KEYS.items()} if has_critic else None
    return out


@dataclass(frozen=True)
class Geometry:
    strategy: str
    colocate_all: bool
    policy_nodes: int
    policy_gpus_per_node: int
    ref_nodes: int
    ref_gpus_per_node: int
    engines: int
    tp: int
    pp: int
    dp: int
    ep: int
    train_batch: int
    mini_batch: int
    micro_batch: int
    n_samples: int
    use_reference: bool
    policy_sp: int
    ref_sp: int
    megatron_policy: tuple[int, int, int]  # tp, pp, cp
    megatron_ref: tuple[int, int, int]
    # The standard trainer trims each generated batch to the tail stride; the fully-async trainer
    # consumes whole generation groups and trims nothing (SkyRL's `_remove_tail_data` is called
    # only in `RayPPOTrainer.train`).
    trims_tail: bool = True
    # The critic (PPO with GAE), as the role plan renders it (`CRITIC_FROM_POLICY`; rlaunch refuses
    # any other critic path). Colocated it shares the policy's GPUs; otherwise it has nodes of its own.
    use_critic: bool = False
    critic_nodes: int = 0
    critic_gpus_per_node: int = 0
    critic_mini_batch: int = 0
    critic_sp: int = 1

    @classmethod
    def from_recipe(cls, recipe: Mapping[str, Any]) -> Geometry:
        def g(key: str) -> Any:
            return get_path(recipe, key)

        plan = plan_values(recipe)
        critic = plan["critic"] or {}
        return cls(
            strategy=g(TRAINER.STRATEGY),
            colocate_all=plan["colocate_all"],
            policy_nodes=plan["policy_num_nodes"],
            policy_gpus_per_node=plan["policy_num_gpus_per_node"],
            ref_nodes=g(PLACEMENT.REF_NUM_NODES),
            ref_gpus_per_node=g(PLACEMENT.REF_NUM_GPUS_PER_NODE),
            engines=plan["num_inference_engines"],
            tp=plan["inference_engine_tensor_parallel_size"],
            pp=plan["inference_engine_pipeline_parallel_size"],
            dp=plan["inference_engine_data_parallel_size"],
            ep=plan["inference_engine_expert_parallel_size"],
            train_batch=plan["train_batch_size"],
            mini_batch=plan["policy_mini_batch_size"],
            micro_batch=plan["micro_train_batch_size_per_gpu"],
            n_samples=plan["n_samples_per_prompt"],
            use_reference=bool(g(ALGORITHM.USE_KL_LOSS)) or bool(g(ALGORITHM.USE_KL_IN_REWARD)),
            policy_sp=g(role_key("policy", ROLE.SEQUENCE_PARALLEL_SIZE)),
            ref_sp=g(role_key("ref", ROLE.SEQUENCE_PARALLEL_SIZE)),
            megatron_policy=_megatron(recipe, "policy"),
            megatron_ref=_megatron(recipe, "ref"),
            trims_tail=not get_path(recipe, FULLY_ASYNC_ENABLED_KEY, False),
            use_critic=bool(critic),
            critic_nodes=critic.get("num_nodes", 0),
            critic_gpus_per_node=critic.get("num_gpus_per_node", 0),
            critic_mini_batch=critic.get("mini_batch_size", 0),
            critic_sp=get_path(recipe, role_key("critic", ROLE.SEQUENCE_PARALLEL_SIZE), 1) if critic else 1,
        )

    # --- GPUs by role -------------------------------------------------------------------------

    @property
    def policy_world(self) -> int:
        return self.policy_nodes * self.policy_gpus_per_node

    @property
    def ref_world(self) -> int:
        return self.ref_nodes * self.ref_gpus_per_node

    @property
    def critic_world(self) -> int:
        return self.critic_nodes * self.critic_gpus_per_node if self.use_critic else 0

    @property
    def dedicated_critic_gpus(self) -> int:
        """GPUs the critic adds to the allocation: its own unless every role is colocated."""
        return 0 if self.colocate_all else self.critic_world

    @property
    def engine_slice(self) -> int:
        """GPUs of one TP x PP model replica inside an engine."""
        return self.tp * self.pp

    @property
    def engine_gpus(self) -> int:
        """GPUs of one whole engine (its DP replicas included)."""
        return self.engine_slice * self.dp

    @property
    def rollout_gpus(self) -> int:
        return self.engines * self.engine_gpus

    @property
    def planned_gpus(self) -> int:
        return self.policy_world if self.colocate_all else self.policy_world + self.rollout_gpus + self.critic_world

    # --- nodes -------------------------------------------------------------------------------

    def engines_per_node(self, gpus_per_node: int) -> int | None:
        """Whole engines one node holds (0: an engine is wider than a node); None if underivable."""
        if self.engine_gpus <= 0 or gpus_per_node <= 0:
            return None
        return gpus_per_node // self.engine_gpus

    def rollout_nodes(self, gpus_per_node: int) -> int | None:
        """Whole nodes the disaggregated engines need, engines never straddling a node."""
        if self.colocate_all:
            return 0
        per_node = self.engines_per_node(gpus_per_node)
        if per_node is None:
            return None
        if per_node == 0:
            return _ceil_div(self.rollout_gpus, gpus_per_node)
        return _ceil_div(self.engines, per_node)

    def physical_nodes(self, gpus_per_node: int) -> int | None:
        rollout = self.rollout_nodes(gpus_per_node)
        critic = 0 if self.colocate_all or not self.use_critic else self.critic_nodes
        return None if rollout is None else self.policy_nodes + rollout + critic

    # --- data parallelism and batches ----------------------------------------------------------

    def data_parallel(self, world: int, sp: int, megatron: tuple[int, int, int]) -> int | None:
        """SkyRL's data-parallel size of a role; None when its model parallelism does not divide it."""
        sizes = megatron if self.strategy == "megatron" else (sp,)
        if world <= 0 or min(sizes) <= 0 or world % math.prod(sizes):
            return None  # two negative Megatron sizes multiply to a positive one: still underivable
        return world // math.prod(sizes)

    @property
    def policy_dp(self) -> int | None:
        return self.data_parallel(self.policy_world, self.policy_sp, self.megatron_policy)

    @property
    def ref_dp(self) -> int | None:
        return self.data_parallel(self.ref_world, self.ref_sp, self.megatron_ref)

    @property
    def critic_dp(self) -> int | None:
        """The critic's data-parallel size (SkyRL trains a critic with FSDP only); None without one."""
        world, sp = self.critic_world, self.critic_sp
        if not self.use_critic or world <= 0 or sp <= 0 or world % sp:
            return None
        return world // sp

    def per_gpu_mini(self, dp: int) -> int:
        """Sequences of one mini batch on one data-parallel rank (SkyRL floors it)."""
        return self.mini_batch * self.n_samples // dp if dp > 0 else 0

    def per_gpu_train(self, dp: int) -> int:
        return self.train_batch * self.n_samples // dp if dp > 0 else 0

    @property
    def gradient_accumulation(self) -> int | None:
        """Micro batches per optimizer step on one policy rank."""
        dp = self.policy_dp
        if dp is None or self.micro_batch <= 0:
            return None
        return self.per_gpu_mini(dp) // self.micro_batch

    @property
    def optimizer_steps(self) -> int | None:
        """Optimizer steps per training step (one per mini batch)."""
        return self.train_batch // self.mini_batch if self.mini_batch > 0 else None

    def lcm_dp(self, *, critic: bool = False) -> int | None:
        """The lcm of the data-parallel sizes of the policy and the reference if used (SkyRL's
        `validate_cfg`), and of the critic if `critic` and there is one (its tail trim)."""
        dps = [self.policy_dp] + ([self.ref_dp] if self.use_reference else [])
        dps += [self.critic_dp] if critic and self.use_critic else []
        known = [d for d in dps if d is not None]
        return math.lcm(*known) if len(known) == len(dps) else None

    def tail_stride(self) -> int | None:
        """Prompts SkyRL keeps a multiple of after generation (it trims the tail to this stride);
        None when the trainer trims nothing (fully async) or the stride is underivable."""
        lcm = self.lcm_dp(critic=True)
        if lcm is None or not self.trims_tail:
            return None
        return lcm // math.gcd(lcm, self.n_samples)


def _ceil_div(a: int, b: int) -> int:
    """Integer ceiling (exact for integers of any size, unlike math.ceil(a / b))."""
    return -(-a // b)


def _megatron(recipe: Mapping[str, Any], role: str) -> tuple[int, int, int]:
    return (
        get_path(recipe, role_key(role, ROLE.MEGATRON_TENSOR_PARALLEL), 1),
        get_path(recipe, role_key(role, ROLE.MEGATRON_PIPELINE_PARALLEL), 1),
        get_path(recipe, role_key(role, ROLE.MEGATRON_CONTEXT_PARALLEL), 1),
    )
