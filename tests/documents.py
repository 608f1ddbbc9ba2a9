"""Real launch documents, rendered through the experiment side (spec -> skyrl_step -> build_config).

`rendered_document` is the seed's 64-GPU document as plain data; `experiment_steps` are the shapes
rlaunch's experiments produce for the SkyRL runtimes, and `composed_document` is one of them exactly
as the task hands it to the SkyRL adapter (after the launch host's `validate_document` and
`compose_document`). The Python 3.12 contract tier imports this module too (repo root on its path).
"""

from __future__ import annotations

from typing import Any

from rlaunch.artifacts import ArtifactStep, Directory, StepContext
from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.launch_config import schema
from rlaunch.skyrl import (
    ArtifactDataSource,
    ArtifactHfModel,
    HfModel,
    IrisSkyRLExecution,
    SkyRLRetentionPolicy,
    SkyRLRolePlan,
    SkyRLRuntime,
    SkyRLSpec,
    SkyRLTopology,
    skyrl_step,
)

DAY = "2026.11.30"
NAME = "checkpoints/gsm8k-grpo"
QWEN3_8B_COMMIT = "9c925d64d72725edaf899c6cb9c377fd0709d9c5"
RECIPE = """
trainer:
  algorithm: {advantage_estimator: grpo, use_kl_loss: true}
  max_prompt_length: 1024
  ckpt_interval: 20
  hf_save_interval: -1
  resume_mode: latest
  logger: console
generator:
  sampling_params: {max_generate_length: 3072}
"""
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
    raise AssertionError("not executed in these tests")


def _inputs(model_name: str) -> tuple[ArtifactStep[Any], ArtifactStep[Any]]:
    model = ArtifactStep(
        name=model_name, version=DAY, artifact_type=HfModel, run=_never, build_config=lambda ctx: {"m": 1}
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


def step_for(
    name: str,
    runtime: str,
    recipe: str,
    plan: SkyRLRolePlan,
    num_nodes: int,
    gpus: int,
    *,
    model: str = "models/qwen3-0.6b",
    tokenizer_revision: str = "main",
    retention: SkyRLRetentionPolicy | None = None,
    seed: int = 5,
    execution: IrisSkyRLExecution | None = None,
) -> ArtifactStep[Any]:
    model_step, data = _inputs(model)
    spec = SkyRLSpec(
        name=name,
        version=DAY,
        config_yaml=recipe,
        runtime=SkyRLRuntime(runtime),
        model=ArtifactHfModel(model_step, tokenizer_revision=tokenizer_revision),
        train_data=(ArtifactDataSource(data, "train.parquet"),),
        validation_data=(ArtifactDataSource(data, "test.parquet"),),
        topology=SkyRLTopology(num_nodes=num_nodes, gpus_per_node=gpus, gpu_variant="H100", role_plan=plan),
        retention=retention or SkyRLRetentionPolicy(),
        seed=seed,
    )
    execution = execution or IrisSkyRLExecution(
        cluster="cw", cluster_config="cw.yaml", cpu=16, memory="64GB", disk="100GB", wandb_entity="rlaunch-lab"
    )
    return skyrl_step(spec, execution, export_hf=True)


def rl_step(ttl_days: int = 14) -> ArtifactStep[Any]:
    """The seed's 64-GPU run: 8 nodes x 8 H100, policy 4 x 8, four DP8 engines, seed 17."""
    plan = _plan(
        colocate_all=False, policy_num_nodes=4, policy_num_gpus_per_node=8, num_inference_engines=4,
        inference_engine_data_parallel_size=8, train_batch_size=256, policy_mini_batch_size=64,
        micro_train_batch_size_per_gpu=2, n_samples_per_prompt=8,
    )  # fmt: skip
    execution = IrisSkyRLExecution(
        cluster="cw",
        cluster_config="lib/iris/config/cw.yaml",
        cpu=96,
        memory="1600GB",
        disk="4TB",
        priority="interactive",
        max_retries=2,
        job_timeout_seconds=3600,
        wandb_entity="lab",
    )
    retention = SkyRLRetentionPolicy(resume_checkpoint_count=3, temporary_storage_ttl_days=ttl_days)
    return step_for(
        NAME, "fsdp", RECIPE, plan, 8, 8, model="models/qwen3-8b", tokenizer_revision=QWEN3_8B_COMMIT,
        retention=retention, seed=17, execution=execution,
    )  # fmt: skip


def rendered_document(prefix: str, ttl_days: int = 14) -> dict[str, Any]:
    """The 64-GPU launch document as plain data, for a run into `prefix`.

    This 64-GPU document declares no smoke, so it carries a `--skip-smoke-gate` authorisation:
    the tests that use it exercise the host's other checks (tests/launch_config/test_gates.py the gate)."""
    step = rl_step(ttl_days)
    document = step.build_config(StepContext.for_run(step, prefix))["launch_document"]
    document["gates"]["skip_smoke_gate"] = {
        "reason": SKIPPED_SMOKE,
        "by": {"user": "tests"},
        "at": "2026-11-30T00:00:00",
    }
    return document


SKIPPED_SMOKE = "document tests exercise the host's other checks"


def _in_build_context(build: Any) -> Any:
    """Build an experiment's graph as its main does (`--version DAY`)."""
    with build_context(BuildContext(VersionCodex(default=DAY))):
        return build()


def experiment_steps() -> dict[str, ArtifactStep[Any]]:
    """Every shape rlaunch's experiments produce for the SkyRL runtimes."""
    from experiments import rl_plan_example

    return {
        "rl_plan_example-64gpu": _in_build_context(lambda: rl_plan_example.rl_step(False)),
        "fsdp-smoke": step_for("checkpoints/fsdp-smoke", "fsdp", SMOKE_RECIPE, _plan(), 1, 2),
        "megatron-smoke": step_for(
            "checkpoints/megatron-smoke",
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
            "checkpoints/fully-async",
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
    from rlaunch.host.compose import compose_document
    from rlaunch.host.validate import validate_document

    document = step.build_config(StepContext.for_run(step, prefix))["launch_document"]
    doc = schema.from_dict(document)
    return compose_document(doc, validate_document(doc)).to_dict()
