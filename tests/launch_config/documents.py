"""A real launch document, rendered through the experiment side (spec -> skyrl_step -> build_config)."""

from __future__ import annotations

from typing import Any

from rlaunch.artifacts import ArtifactStep, Directory, StepContext
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


def _never(config: Any) -> None:
    raise AssertionError("not executed in these tests")


def rl_step(ttl_days: int = 14) -> ArtifactStep[Any]:
    model = ArtifactStep(
        name="models/qwen3-8b", version=DAY, artifact_type=HfModel, run=_never, build_config=lambda ctx: {"m": 1}
    )
    data = ArtifactStep(
        name="data/gsm8k", version=DAY, artifact_type=Directory, run=_never, build_config=lambda ctx: {"d": 1}
    )
    plan = SkyRLRolePlan(
        colocate_all=False, policy_num_nodes=4, policy_num_gpus_per_node=8, num_inference_engines=4,
        inference_engine_tensor_parallel_size=1, inference_engine_pipeline_parallel_size=1,
        inference_engine_data_parallel_size=8, inference_engine_expert_parallel_size=1,
        train_batch_size=256, policy_mini_batch_size=64, micro_train_batch_size_per_gpu=2, n_samples_per_prompt=8,
    )  # fmt: skip
    spec = SkyRLSpec(
        name=NAME,
        version=DAY,
        config_yaml=RECIPE,
        runtime=SkyRLRuntime("fsdp"),
        model=ArtifactHfModel(model, tokenizer_revision="9c925d64d72725edaf899c6cb9c377fd0709d9c5"),
        train_data=(ArtifactDataSource(data, "train.parquet"),),
        validation_data=(ArtifactDataSource(data, "test.parquet"),),
        topology=SkyRLTopology(num_nodes=8, gpus_per_node=8, gpu_variant="H100", role_plan=plan),
        retention=SkyRLRetentionPolicy(resume_checkpoint_count=3, temporary_storage_ttl_days=ttl_days),
        seed=17,
    )
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
    return skyrl_step(spec, execution, export_hf=True)


def rendered_document(prefix: str, ttl_days: int = 14) -> dict[str, Any]:
    """The launch document as plain data, for a run into `prefix`.

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
