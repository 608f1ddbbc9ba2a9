"""Every recipe key rlaunch renders or reads, named once.

A recipe key is a dotted path into the SkyRL recipe every runtime composes over its base config
(`runtimes/base_configs/*.yaml`): `TRAINER.RESUME_MODE` is "trainer.resume_mode". The rules, the
launch config, the host, the judgement, the views and observe address the recipe through these
constants and nowhere else, so a key SkyRL renames is one edit here, and
tests/launch_config/test_recipe_keys.py checks every key against the base config of every runtime
(a role's leaves under the policy, which has them all) and fails naming the key and the runtimes
that lack it.

The keys are plain strings (`get_path`, `set_path`, dict keys, YAML and JSON take them unchanged),
grouped by the section of the recipe they live in. A key of a trainer role (policy, ref, critic)
is `role_key(role, ROLE.<leaf>)`: not every role has every leaf (the critic has no
`megatron_config`), and a reader of an absent leaf passes a default.

The runtime adapters (`rlaunch/runtimes/adapters/**`) run inside a runtime's own environment and
cannot import rlaunch: they keep their own key paths (ARCHITECTURE.md, "Copies the adapter boundary
forces").
"""

from __future__ import annotations

from typing import Final


def role_key(role: str, leaf: str) -> str:
    """`trainer.<role>.<leaf>` for a trainer role (policy, ref, critic) and one of `ROLE`'s leaves."""
    return f"trainer.{role}.{leaf}"


class TRAINER:
    """`trainer.*`: the run, its checkpoints and its batches."""

    STRATEGY: Final = "trainer.strategy"
    SEED: Final = "trainer.seed"
    LOGGER: Final = "trainer.logger"
    PROJECT_NAME: Final = "trainer.project_name"
    RUN_NAME: Final = "trainer.run_name"
    LOG_PATH: Final = "trainer.log_path"
    CKPT_PATH: Final = "trainer.ckpt_path"
    CKPT_INTERVAL: Final = "trainer.ckpt_interval"
    MAX_CKPTS_TO_KEEP: Final = "trainer.max_ckpts_to_keep"
    EXPORT_PATH: Final = "trainer.export_path"
    HF_SAVE_INTERVAL: Final = "trainer.hf_save_interval"
    RESUME_MODE: Final = "trainer.resume_mode"
    RESUME_PATH: Final = "trainer.resume_path"
    MAX_TRAINING_STEPS: Final = "trainer.max_training_steps"
    MAX_PROMPT_LENGTH: Final = "trainer.max_prompt_length"
    TRAIN_BATCH_SIZE: Final = "trainer.train_batch_size"
    POLICY_MINI_BATCH_SIZE: Final = "trainer.policy_mini_batch_size"
    CRITIC_MINI_BATCH_SIZE: Final = "trainer.critic_mini_batch_size"
    MICRO_TRAIN_BATCH_SIZE_PER_GPU: Final = "trainer.micro_train_batch_size_per_gpu"
    MICRO_FORWARD_BATCH_SIZE_PER_GPU: Final = "trainer.micro_forward_batch_size_per_gpu"
    MAX_TOKENS_PER_MICROBATCH: Final = "trainer.max_tokens_per_microbatch"
    REMOVE_MICROBATCH_PADDING: Final = "trainer.remove_microbatch_padding"
    GRADIENT_CHECKPOINTING: Final = "trainer.gradient_checkpointing"


class ROLE:
    """Leaves under `trainer.<role>` (see `role_key`)."""

    MODEL_PATH: Final = "model.path"
    LORA_RANK: Final = "model.lora.rank"
    SEQUENCE_PARALLEL_SIZE: Final = "sequence_parallel_size"
    LANGUAGE_MODEL_ONLY: Final = "language_model_only"
    INFERENCE_ONLY_INIT: Final = "inference_only_init"
    FSDP_CPU_OFFLOAD: Final = "fsdp_config.cpu_offload"
    FSDP_SIZE: Final = "fsdp_config.fsdp_size"
    MEGATRON_CONFIG: Final = "megatron_config"
    MEGATRON_ROUTING_REPLAY: Final = "megatron_config.moe_enable_routing_replay"
    MEGATRON_TRANSFORMER_CONFIG_KWARGS: Final = "megatron_config.transformer_config_kwargs"
    MEGATRON_FP8_PARAM_GATHER: Final = "megatron_config.ddp_config.fp8_param_gather"
    MEGATRON_OPTIMIZER_CPU_OFFLOAD: Final = "megatron_config.optimizer_config_kwargs.optimizer_cpu_offload"
    MEGATRON_TENSOR_PARALLEL: Final = "megatron_config.tensor_model_parallel_size"
    MEGATRON_PIPELINE_PARALLEL: Final = "megatron_config.pipeline_model_parallel_size"
    MEGATRON_CONTEXT_PARALLEL: Final = "megatron_config.context_parallel_size"
    MEGATRON_EXPERT_PARALLEL: Final = "megatron_config.expert_model_parallel_size"
    MEGATRON_EXPERT_TENSOR_PARALLEL: Final = "megatron_config.expert_tensor_parallel_size"


class PLACEMENT:
    """`trainer.placement.*`: which nodes and GPUs each trainer role has."""

    COLOCATE_ALL: Final = "trainer.placement.colocate_all"
    COLOCATE_POLICY_REF: Final = "trainer.placement.colocate_policy_ref"
    POLICY_NUM_NODES: Final = "trainer.placement.policy_num_nodes"
    POLICY_NUM_GPUS_PER_NODE: Final = "trainer.placement.policy_num_gpus_per_node"
    REF_NUM_NODES: Final = "trainer.placement.ref_num_nodes"
    REF_NUM_GPUS_PER_NODE: Final = "trainer.placement.ref_num_gpus_per_node"
    CRITIC_NUM_NODES: Final = "trainer.placement.critic_num_nodes"
    CRITIC_NUM_GPUS_PER_NODE: Final = "trainer.placement.critic_num_gpus_per_node"


class ALGORITHM:
    """`trainer.algorithm.*`: the loss and the advantage."""

    ADVANTAGE_ESTIMATOR: Final = "trainer.algorithm.advantage_estimator"
    USE_KL_LOSS: Final = "trainer.algorithm.use_kl_loss"
    USE_KL_IN_REWARD: Final = "trainer.algorithm.use_kl_in_reward"
    POLICY_LOSS_TYPE: Final = "trainer.algorithm.policy_loss_type"


class ASYNC_TRAINER:
    """`trainer.fully_async.*`: SkyRL's fully-async trainer."""

    ENABLED: Final = "trainer.fully_async.enabled"
    NUM_PARALLEL_GENERATION_WORKERS: Final = "trainer.fully_async.num_parallel_generation_workers"
    MAX_STALENESS_STEPS: Final = "trainer.fully_async.max_staleness_steps"


class GENERATOR:
    """`generator.*` outside the engines and the sampling parameters."""

    N_SAMPLES_PER_PROMPT: Final = "generator.n_samples_per_prompt"
    MAX_INPUT_LENGTH: Final = "generator.max_input_length"
    MAX_TURNS: Final = "generator.max_turns"
    BATCHED: Final = "generator.batched"
    STEP_WISE_TRAJECTORIES: Final = "generator.step_wise_trajectories"


class SAMPLING:
    """`generator.sampling_params.*`."""

    MAX_GENERATE_LENGTH: Final = "generator.sampling_params.max_generate_length"


class ENGINE:
    """`generator.inference_engine.*`: the rollout engines."""

    NUM_ENGINES: Final = "generator.inference_engine.num_engines"
    TENSOR_PARALLEL_SIZE: Final = "generator.inference_engine.tensor_parallel_size"
    PIPELINE_PARALLEL_SIZE: Final = "generator.inference_engine.pipeline_parallel_size"
    DATA_PARALLEL_SIZE: Final = "generator.inference_engine.data_parallel_size"
    EXPERT_PARALLEL_SIZE: Final = "generator.inference_engine.expert_parallel_size"
    RUN_ENGINES_LOCALLY: Final = "generator.inference_engine.run_engines_locally"
    ENABLE_PD: Final = "generator.inference_engine.enable_pd"
    NUM_PREFILL: Final = "generator.inference_engine.num_prefill"
    EXTERNAL_PROXY_URL: Final = "generator.inference_engine.external_proxy_url"
    EXTERNAL_SERVER_URLS: Final = "generator.inference_engine.external_server_urls"
    DISTRIBUTED_EXECUTOR_BACKEND: Final = "generator.inference_engine.distributed_executor_backend"
    ENABLE_RETURN_ROUTED_EXPERTS: Final = "generator.inference_engine.enable_return_routed_experts"
    MODEL_DTYPE: Final = "generator.inference_engine.model_dtype"
    GPU_MEMORY_UTILIZATION: Final = "generator.inference_engine.gpu_memory_utilization"
    MAX_NUM_BATCHED_TOKENS: Final = "generator.inference_engine.max_num_batched_tokens"
    MAX_NUM_SEQS: Final = "generator.inference_engine.max_num_seqs"
    LANGUAGE_MODEL_ONLY: Final = "generator.inference_engine.language_model_only"
    ENFORCE_EAGER: Final = "generator.inference_engine.enforce_eager"
    RETURN_SAMPLE_SUPPORT_SET: Final = "generator.inference_engine.enable_return_sample_support_set"
    # Under a free-form mapping (the base config's `open_mappings`): vLLM's own engine arguments.
    KV_CACHE_DTYPE: Final = "generator.inference_engine.engine_init_kwargs.kv_cache_dtype"
    MAX_MODEL_LEN: Final = "generator.inference_engine.engine_init_kwargs.max_model_len"
    QUANTIZATION: Final = "generator.inference_engine.engine_init_kwargs.quantization"
    CPU_OFFLOAD_GB: Final = "generator.inference_engine.engine_init_kwargs.cpu_offload_gb"
    LOGPROBS_MODE: Final = "generator.inference_engine.engine_init_kwargs.logprobs_mode"


class DATA:
    """`data.*`: the prompt files."""

    TRAIN_DATA: Final = "data.train_data"
    VAL_DATA: Final = "data.val_data"


# Every namespace of whole keys (ROLE holds leaves, not keys: see `role_key`).
NAMESPACES: Final = (TRAINER, PLACEMENT, ALGORITHM, ASYNC_TRAINER, GENERATOR, SAMPLING, ENGINE, DATA)


def namespace_keys(namespace: type) -> dict[str, str]:
    """A namespace's constants: NAME -> key (or leaf, for `ROLE`)."""
    return {name: value for name, value in vars(namespace).items() if name.isupper() and isinstance(value, str)}
