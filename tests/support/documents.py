"""Real launch documents, rendered through the experiment side (spec -> skyrl_step -> build_config).

`rendered_document` is the seed's 64-GPU document as plain data; `experiment_steps` are the shapes
rlaunch's experiments produce for the SkyRL runtimes, and `composed_document` is one of them exactly
as the task hands it to the SkyRL adapter (after the launch host's `validate_document` and
`compose_document`). The Python 3.12 contract tier imports this module too (repo root on its path).
"""

from __future__ import annotations

from typing import Any

from rlaunch.artifacts import ArtifactStep, StepContext
from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.launch_config import schema
from rlaunch.skyrl import SkyRLRetentionPolicy, SkyRLRolePlan, skyrl_step
from tests.support.specs import DAY, SMOKE_PLAN, iris, model_step, spec, topology

NAME = "checkpoints/gsm8k-grpo"
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


def rl_step(ttl_days: int = 14) -> ArtifactStep[Any]:
    """The seed's 64-GPU run: 8 nodes x 8 H100, policy 4 x 8, four DP8 engines, seed 17."""
    retention = SkyRLRetentionPolicy(resume_checkpoint_count=3, temporary_storage_ttl_days=ttl_days)
    execution = iris(
        cluster="cw", cluster_config="lib/iris/config/cw.yaml", job_timeout_seconds=3600, wandb_entity="lab"
    )
    return skyrl_step(spec(name=NAME, retention=retention), execution, export_hf=True)


def rendered_document(prefix: str, ttl_days: int = 14) -> dict[str, Any]:
    """The 64-GPU launch document as plain data, for a run into `prefix`.

    This 64-GPU document declares no smoke, so it carries a `--skip-smoke-gate` authorisation:
    the tests that use it exercise the host's other checks (tests/judgement/test_host_gates.py the gate)."""
    step = rl_step(ttl_days)
    document = step.build_config(StepContext.for_run(step, prefix))["launch_document"]
    document["gates"]["skip_smoke_gate"] = {
        "reason": SKIPPED_SMOKE,
        "by": {"user": "tests"},
        "at": "2026-11-30T00:00:00",
    }
    return document


SKIPPED_SMOKE = "document tests exercise the host's other checks"


def smoke_step(
    name: str, runtime: str, recipe: str, plan: SkyRLRolePlan, num_nodes: int, gpus: int
) -> ArtifactStep[Any]:
    """A contract-tier shape: a small model, the recipe as written, `num_nodes` x `gpus` H100."""
    small = spec(
        name=name,
        config_yaml=recipe,
        profile=runtime,
        model=model_step("models/qwen3-0.6b"),
        tokenizer_revision="main",
        topo=topology(plan, num_nodes=num_nodes, gpus_per_node=gpus),
        retention=SkyRLRetentionPolicy(),
        seed=5,
    )
    execution = iris(
        cluster="cw", cluster_config="cw.yaml", cpu=16, memory="64GB", disk="100GB", wandb_entity="rlaunch-lab"
    )
    return skyrl_step(small, execution, export_hf=True)


def _in_build_context(build: Any) -> Any:
    """Build an experiment's graph as its main does (`--version DAY`)."""
    with build_context(BuildContext(VersionCodex(default=DAY))):
        return build()


def experiment_steps() -> dict[str, ArtifactStep[Any]]:
    """Every shape rlaunch's experiments produce for the SkyRL runtimes."""
    from experiments import rl_plan_example

    megatron_recipe = SMOKE_RECIPE.replace(
        "trainer:\n",
        "trainer:\n  policy: {megatron_config: {tensor_model_parallel_size: 2}}\n"
        "  ref: {megatron_config: {tensor_model_parallel_size: 2}}\n",
    )
    megatron_plan = SMOKE_PLAN | dict(policy_num_gpus_per_node=4, inference_engine_tensor_parallel_size=2)
    async_plan = SMOKE_PLAN | dict(
        colocate_all=False, policy_num_gpus_per_node=4, num_inference_engines=4,
        train_batch_size=32, policy_mini_batch_size=32, micro_train_batch_size_per_gpu=4,
    )  # fmt: skip
    return {
        "rl_plan_example-64gpu": _in_build_context(lambda: rl_plan_example.rl_step(False)),
        "fsdp-smoke": smoke_step("checkpoints/fsdp-smoke", "fsdp", SMOKE_RECIPE, SkyRLRolePlan(**SMOKE_PLAN), 1, 2),
        "megatron-smoke": smoke_step(
            "checkpoints/megatron-smoke", "megatron", megatron_recipe, SkyRLRolePlan(**megatron_plan), 1, 4
        ),
        "fully_async": smoke_step(
            "checkpoints/fully-async", "fsdp", FULLY_ASYNC_RECIPE, SkyRLRolePlan(**async_plan), 2, 4
        ),
    }


def composed_document(step: ArtifactStep[Any], prefix: str) -> dict[str, Any]:
    """The host-resolved document (every SkyRL key explicit, canonical values injected)."""
    from rlaunch.host.compose import compose_document
    from rlaunch.host.validate import validate_document

    document = step.build_config(StepContext.for_run(step, prefix))["launch_document"]
    doc = schema.from_dict(document)
    return compose_document(doc, validate_document(doc)).to_dict()
