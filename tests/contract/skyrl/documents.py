"""The composed launch documents rlaunch produces for its experiments' shapes, exactly as the task
hands them to the SkyRL adapter: experiment side (spec -> skyrl_step -> build_config), then the
launch host's validation and composition (`validate_document`, `compose_document`)."""

from __future__ import annotations

from typing import Any

from experiments import rl_plan_example
from rlaunch.artifacts import ArtifactStep, Directory, StepContext
from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.host.compose import compose_document
from rlaunch.host.validate import validate_document
from rlaunch.launch_config import schema
from rlaunch.skyrl import (
    ArtifactDataSource,
    ArtifactHfModel,
    HfModel,
    IrisSkyRLExecution,
    SkyRLRolePlan,
    SkyRLRuntime,
    SkyRLSpec,
    SkyRLTopology,
    skyrl_step,
)

DAY = "2026.11.30"
SMOKE_RECIPE = """
trainer:
  algorithm: {advantage_estimator: grpo, use_kl_loss: true}
  max_prompt_length: 256
  max_training_steps: 4
  ckpt_interval: 2
  hf_save_interval: -1
  resume_mode: latest
  logger: wandb
  project_name: rlaunch-smoke
generator:
  sampling_params: {max_generate_length: 256}
environment:
  env_class: gsm8k
"""
FULLY_ASYNC_RECIPE = """
entrypoint: fully_async
trainer:
  algorithm: {advantage_estimator: grpo, use_kl_loss: true, policy_loss_type: rollout_is}
  max_prompt_length: 512
  ckpt_interval: 10
  hf_save_interval: -1
  resume_mode: latest
  logger: console
  fully_async: {max_staleness_steps: 2, num_parallel_generation_workers: 64}
generator:
  sampling_params: {max_generate_length: 1024}
"""


def _never(config: Any) -> None:
    raise AssertionError("not executed in the contract tests")


def _inputs() -> tuple[ArtifactStep[Any], ArtifactStep[Any]]:
    model = ArtifactStep(
        name="models/qwen3-0.6b", version=DAY, artifact_type=HfModel, run=_never, build_config=lambda ctx: {"m": 1}
    )
    data = ArtifactStep(
        name="data/gsm8k", version=DAY, artifact_type=Directory, run=_never, build_config=lambda ctx: {"d": 1}
    )
    return model, data


def _plan(**overrides: Any) -> SkyRLRolePlan:
    fields: dict[str, Any] = dict(
        colocate_all=True, policy_num_nodes=1, policy_num_gpus_per_node=2, num_inference_engines=2,
        inference_engine_tensor_parallel_size=1, inference_engine_pipeline_parallel_size=1,
        inference_engine_data_parallel_size=1, inference_engine_expert_parallel_size=1,
        train_batch_size=8, policy_mini_batch_size=8, micro_train_batch_size_per_gpu=2, n_samples_per_prompt=4,
    )  # fmt: skip
    fields.update(overrides)
    return SkyRLRolePlan(**fields)


def step_for(name: str, runtime: str, recipe: str, plan: SkyRLRolePlan, num_nodes: int, gpus: int) -> ArtifactStep[Any]:
    model, data = _inputs()
    spec = SkyRLSpec(
        name=f"checkpoints/{name}",
        version=DAY,
        config_yaml=recipe,
        runtime=SkyRLRuntime(runtime),
        model=ArtifactHfModel(model, tokenizer_revision="main"),
        train_data=(ArtifactDataSource(data, "train.parquet"),),
        validation_data=(ArtifactDataSource(data, "test.parquet"),),
        topology=SkyRLTopology(num_nodes=num_nodes, gpus_per_node=gpus, gpu_variant="H100", role_plan=plan),
        seed=5,
    )
    execution = IrisSkyRLExecution(
        cluster="cw", cluster_config="cw.yaml", cpu=16, memory="64GB", disk="100GB", wandb_entity="rlaunch-lab"
    )
    return skyrl_step(spec, execution, export_hf=True)


def _in_build_context(build: Any) -> Any:
    """Build an experiment's graph as its main does (`--version DAY`)."""
    with build_context(BuildContext(VersionCodex(default=DAY))):
        return build()


def experiment_steps() -> dict[str, ArtifactStep[Any]]:
    """Every shape rlaunch's experiments produce for the SkyRL runtimes."""
    return {
        "rl_plan_example-64gpu": _in_build_context(lambda: rl_plan_example.rl_step(False)),
        "fsdp-smoke": step_for("fsdp-smoke", "fsdp", SMOKE_RECIPE, _plan(), 1, 2),
        "megatron-smoke": step_for(
            "megatron-smoke",
            "megatron",
            SMOKE_RECIPE.replace(
                "trainer:\n",
                "trainer:\n  policy: {megatron_config: {tensor_model_parallel_size: 2}}\n"
                "  ref: {megatron_config: {tensor_model_parallel_size: 2}}\n",
            ),
            _plan(policy_num_gpus_per_node=4, num_inference_engines=2, inference_engine_tensor_parallel_size=2),
            1,
            4,
        ),
        "fully_async": step_for(
            "fully-async",
            "fsdp",
            FULLY_ASYNC_RECIPE,
            _plan(
                colocate_all=False,
                policy_num_gpus_per_node=4,
                num_inference_engines=4,
                train_batch_size=32,
                policy_mini_batch_size=32,
                micro_train_batch_size_per_gpu=4,
            ),  # fmt: skip
            2,
            4,
        ),
    }


def composed_document(step: ArtifactStep[Any], prefix: str) -> dict[str, Any]:
    """The host-resolved document (every SkyRL key explicit, canonical values injected)."""
    document = step.build_config(StepContext.for_run(step, prefix))["launch_document"]
    doc = schema.from_dict(document)
    return compose_document(doc, validate_document(doc)).to_dict()
