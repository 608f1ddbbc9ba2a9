"""The role plan and topology: every parallelism and batch number, stated once.

`SkyRLRolePlan` has no defaults on purpose: a researcher writes every geometry and batch value,
and rlaunch renders them into the trainer recipe. Every number derived from them lives in
`rlaunch.launch_config.geometry`; the arithmetic between them is checked by the rules
(`rlaunch.rules`, run by the preflight and the launch host), which report every violation at once.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from rlaunch.skyrl.fields import require_bool, require_int, require_str


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

    def __post_init__(self) -> None:
        require_bool("SkyRLRolePlan", "colocate_all", self.colocate_all)
        for f in fields(self):
            if f.name != "colocate_all":
                require_int("SkyRLRolePlan", f.name, getattr(self, f.name))


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
