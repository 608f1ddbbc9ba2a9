"""Role geometry read from a composed recipe: the derived numbers both sides agree on.

The preflight (experiment side) and the launch host both derive policy data-parallel size,
rollout GPUs and the physical node count from here, so they can never disagree about what a
recipe asks for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch.launch_config.recipe import get_path

FULLY_ASYNC = "fully_async"


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

    @classmethod
    def from_recipe(cls, recipe: Mapping[str, Any]) -> Geometry:
        g = lambda key: get_path(recipe, key)  # noqa: E731
        return cls(
            strategy=g("trainer.strategy"),
            colocate_all=g("trainer.placement.colocate_all"),
            policy_nodes=g("trainer.placement.policy_num_nodes"),
            policy_gpus_per_node=g("trainer.placement.policy_num_gpus_per_node"),
            ref_nodes=g("trainer.placement.ref_num_nodes"),
            ref_gpus_per_node=g("trainer.placement.ref_num_gpus_per_node"),
            engines=g("generator.inference_engine.num_engines"),
            tp=g("generator.inference_engine.tensor_parallel_size"),
            pp=g("generator.inference_engine.pipeline_parallel_size"),
            dp=g("generator.inference_engine.data_parallel_size"),
            ep=g("generator.inference_engine.expert_parallel_size"),
            train_batch=g("trainer.train_batch_size"),
            mini_batch=g("trainer.policy_mini_batch_size"),
            micro_batch=g("trainer.micro_train_batch_size_per_gpu"),
            n_samples=g("generator.n_samples_per_prompt"),
            use_reference=bool(g("trainer.algorithm.use_kl_loss")) or bool(g("trainer.algorithm.use_kl_in_reward")),
            policy_sp=g("trainer.policy.sequence_parallel_size"),
            ref_sp=g("trainer.ref.sequence_parallel_size"),
            megatron_policy=_megatron(recipe, "trainer.policy"),
            megatron_ref=_megatron(recipe, "trainer.ref"),
        )

    @property
    def policy_world(self) -> int:
        return self.policy_nodes * self.policy_gpus_per_node

    @property
    def ref_world(self) -> int:
        return self.ref_nodes * self.ref_gpus_per_node

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
        return self.policy_world if self.colocate_all else self.policy_world + self.rollout_gpus

    def rollout_nodes(self, gpus_per_node: int) -> int:
        """Whole nodes the disaggregated engines need, engines never straddling a node."""
        if self.colocate_all:
            return 0
        per_node = gpus_per_node // self.engine_gpus if self.engine_gpus <= gpus_per_node else 0
        if per_node == 0:
            return math.ceil(self.rollout_gpus / gpus_per_node)
        return math.ceil(self.engines / per_node)

    def physical_nodes(self, gpus_per_node: int) -> int:
        return self.policy_nodes + self.rollout_nodes(gpus_per_node)

    def data_parallel(self, world: int, sp: int, megatron: tuple[int, int, int]) -> int | None:
        """SkyRL's data-parallel size of a role; None when its model parallelism does not divide it."""
        if self.strategy == "megatron":
            tp, pp, cp = megatron
            return world // (tp * pp * cp) if world % (tp * pp * cp) == 0 else None
        return world // sp if sp > 0 and world % sp == 0 else None

    @property
    def policy_dp(self) -> int | None:
        return self.data_parallel(self.policy_world, self.policy_sp, self.megatron_policy)

    @property
    def ref_dp(self) -> int | None:
        return self.data_parallel(self.ref_world, self.ref_sp, self.megatron_ref)

    def per_gpu_mini(self, dp: int) -> int:
        return self.mini_batch * self.n_samples // dp

    def per_gpu_train(self, dp: int) -> int:
        return self.train_batch * self.n_samples // dp

    def lcm_dp(self) -> int | None:
        dps = [self.policy_dp] + ([self.ref_dp] if self.use_reference else [])
        if any(d is None for d in dps):
            return None
        return math.lcm(*[d for d in dps if d is not None])

    def tail_stride(self) -> int | None:
        """Prompts SkyRL keeps a multiple of after generation (it trims the tail to this stride)."""
        lcm = self.lcm_dp()
        return None if lcm is None else lcm // math.gcd(lcm, self.n_samples)


def _megatron(recipe: Mapping[str, Any], role: str) -> tuple[int, int, int]:
    base = f"{role}.megatron_config"
    return (
        get_path(recipe, f"{base}.tensor_model_parallel_size", 1),
        get_path(recipe, f"{base}.pipeline_model_parallel_size", 1),
        get_path(recipe, f"{base}.context_parallel_size", 1),
    )
