"""The role plan and topology: every parallelism and batch number, stated once.

`SkyRLRolePlan` has no defaults on purpose: a researcher writes every geometry and batch value,
and rlaunch renders them into the trainer recipe. The critic is the one optional role
(`SkyRLCriticPlan`): GRPO-style estimators train none. Every number derived from them lives in
`rlaunch.launch_config.geometry`; the arithmetic between them is checked by the rules
(`rlaunch.rules`, run by the preflight and the launch host), which report every violation at once.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any

from rlaunch.field_checks import require_bool, require_int, require_str


@dataclass(frozen=True)
class SkyRLCriticPlan:
    """The critic PPO's GAE advantage needs: a value model SkyRL trains beside the policy.

    It starts from the policy's model (SkyRL puts a value head on it). With `colocate_all` it shares
    the policy's GPUs (SkyRL requires the same count); otherwise it has `num_nodes` whole nodes of
    its own, beside the policy's and the engines'. `mini_batch_size` is its prompts per optimizer
    step (SkyRL's `critic_mini_batch_size`); it uses the policy's micro batch.
    """

    num_nodes: int
    num_gpus_per_node: int
    mini_batch_size: int

    def __post_init__(self) -> None:
        for f in fields(self):
            require_int("SkyRLCriticPlan", f.name, getattr(self, f.name))


@dataclass(frozen=True)
class SkyRLRolePlan:
    colocate_all: bool
    policy_num_nodes: int
    policy_num_gpus_per_node: int
    num_inference_engines: int
    inference_engine_tensor_parallel_size: int
    inference_engine_pipeline_parallel_size: int
    inference_engine_data_parallel_size: int
    inference_engine_expert_parallel_size: int
    train_batch_size: int
    policy_mini_batch_size: int
    micro_train_batch_size_per_gpu: int
    n_samples_per_prompt: int
    critic: SkyRLCriticPlan | None = None  # the one optional role: only GAE (PPO) needs it

    def __post_init__(self) -> None:
        require_bool("SkyRLRolePlan", "colocate_all", self.colocate_all)
        for f in fields(self):
            if f.name not in ("colocate_all", "critic"):
                require_int("SkyRLRolePlan", f.name, getattr(self, f.name))
        if self.critic is not None and not isinstance(self.critic, SkyRLCriticPlan):
            raise TypeError(f"SkyRLRolePlan.critic must be a SkyRLCriticPlan or None, got {self.critic!r}")


@dataclass(frozen=True)
class SkyRLTopology:
    """The physical allocation: `num_nodes` whole nodes of `gpus_per_node` devices.

    For the `trl-cpu` runtime the devices are CPU slots (one training process each) and the
    variant is `cpu`.
    """

    num_nodes: int
    gpus_per_node: int
    gpu_variant: str
    role_plan: SkyRLRolePlan

    def __post_init__(self) -> None:
        require_int("SkyRLTopology", "num_nodes", self.num_nodes)
        require_int("SkyRLTopology", "gpus_per_node", self.gpus_per_node)
        require_str("SkyRLTopology", "gpu_variant", self.gpu_variant)
        if not isinstance(self.role_plan, SkyRLRolePlan):
            raise TypeError(f"SkyRLTopology.role_plan must be a SkyRLRolePlan, got {self.role_plan!r}")

    def as_dict(self) -> dict[str, Any]:
        """The topology as plain data (the RL step's config and its run record): a role plan without
        a critic leaves the key out, so such a plan keeps the identity it had before the role existed."""
        out = dataclasses.asdict(self)
        if out["role_plan"]["critic"] is None:
            del out["role_plan"]["critic"]
        return out
