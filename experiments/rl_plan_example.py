"""A realistic 64-GPU GRPO plan (8 nodes x 8 H100): validate it before anything is allocated.

    python -m experiments.rl_plan_example --version 2026.11.30 --stage rl
    python -m experiments.rl_plan_example --version 2026.11.30 --stage evaluation
    python -m experiments.rl_plan_example --version 2026.11.30 --stage smoke  # the GPU smoke alone
    python -m experiments.rl_plan_example --version 2026.11.30 --stage rl --broken   # every violation, at once
    python -m experiments.rl_plan_example --version 2026.11.30 --stage rl --variant one-node-24gb
    python -m experiments.rl_plan_example --version 2026.11.30 --stage rl --variant long-generation-24gb

Policy: 4 nodes x 8 GPUs (FSDP). Rollout: 4 node-sized engines (TP1 x DP8), disaggregated, so
32 + 32 = 64 GPUs. The broken variant leaves rollout DP at 1 (36 GPUs for a 64-GPU allocation)
and picks batch sizes SkyRL would only refuse after the GPUs were allocated. The plan prints each
role's per-GPU memory from Qwen3-8B's own config.json; the two 24 GB variants cannot fit and are
refused before anything is built: the same policy colocated on one node of four 24 GB L4s (its
model states alone exceed a GPU), and 32768-token sequences on a node of eight L4s (one sequence
needs more KV cache than an engine's utilization budget leaves).

The data is GSM8K pinned to a hub commit (`hf_dataset_source`), converted to SkyRL's prompt format
in a step of the graph. The large run declares its smoke (the smoke gate): the same recipe,
runtime, strategy, entrypoint, model and data, the same geometry class at its smallest
(disaggregated roles take whole nodes: one policy node, one node-sized TP1 x DP8 engine), four
steps: the same model (Qwen3-8B), accelerator (H100), algorithm and token lengths. Its plan shows
the smoke, as declared, with the launch's shape, and `--run` waits until that smoke ran, passed
`rlaunch verify-smoke` and the run it stored has parity with the launch. The smoke is declared one
(`is_smoke=True`): a rehearsal is never large, so it goes without a smoke of its own; its two nodes
are more than the default threshold, so it says why (`waivers={"large": ...}`, shown as waived in
its judgement and kept in its run record). `--stage` has no default: the terminal stage is chosen,
never assumed.

The conversion of the data and the evaluation are step jobs (`StepExecution`) whose work runs in
the fsdp runtime's environment (`runtime_tool`: rlaunch itself has neither pyarrow nor vLLM): the
conversion (`rlaunch_skyrl.gsm8k`) on one large-memory CPU node, the evaluation
(`rlaunch.evaluation.evaluation_step`, which runs `rlaunch_skyrl.evaluate`: greedy vLLM generation
over the node's 8 H100s, scored by the GSM8K answer rule) after the RL step, on the converted test
split. Its report gives the accuracy with its 95% interval clustered by prompt, n, the samples per
prompt, the weights' sha256 and the identities of the model and data it scored. The plan shows each step's placement and, per terminal stage, the GPU-hours it
would allocate at most: `--stage rl` versus `--stage evaluation` is a visible choice.
"""

from __future__ import annotations

import tempfile
from typing import Any

import click

from experiments.smoke import publish
from rlaunch.artifacts import ArtifactStep, resolve_version
from rlaunch.cli import rl_build_options
from rlaunch.evaluation import EvalReport, Sampling, evaluation_step
from rlaunch.runtimes.environment import runtime_tool
from rlaunch.skyrl import (
    ArtifactDataSource,
    ArtifactHfModel,
    HfModel,
    IrisSkyRLExecution,
    PromptData,
    SkyRLRetentionPolicy,
    SkyRLRolePlan,
    SkyRLRuntime,
    SkyRLSpec,
    SkyRLTopology,
    skyrl_step,
)
from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep
from rlaunch.sources.hub import hf_dataset_source, hf_model_source
from rlaunch.step_jobs import StepExecution

RUNTIME = "fsdp"  # SkyRL 0.4.0: the RL step trains in it, the data and evaluation steps run their tools in it
RECIPE = """
trainer:
  algorithm: {advantage_estimator: grpo, use_kl_loss: true, kl_loss_coef: 0.001}
  policy:
    optimizer_config: {lr: 1.0e-6, weight_decay: 0.01}
  max_prompt_length: 1024
  ckpt_interval: 20
  hf_save_interval: -1
  resume_mode: latest
  logger: wandb
  project_name: gsm8k-grpo
generator:
  sampling_params: {max_generate_length: 3072, temperature: 1.0}
environment:
  env_class: gsm8k
"""


QWEN3_8B_COMMIT = "9c925d64d72725edaf899c6cb9c377fd0709d9c5"
# Qwen/Qwen3-8B config.json at that commit: the architecture the plan sizes memory with (the
# fetch refuses a snapshot whose config.json says otherwise).
QWEN3_8B_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "max_position_embeddings": 40960,
    "model_type": "qwen3",
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_theta": 1000000,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 151936,
}
VARIANTS = ("64-gpu", "one-node-24gb", "long-generation-24gb")


def pretrained_model() -> ArtifactStep[HfModel]:
    """The checkpoint the run starts from, pinned to a hub commit (not an ambient path or a branch)."""
    return hf_model_source("models/qwen3-8b", "Qwen/Qwen3-8B", QWEN3_8B_COMMIT, config=QWEN3_8B_CONFIG)


GSM8K_COMMIT = "e53f048856ff4f594e959d75785d2c2d37b678ee"
GSM8K_FILES = ("main/train-00000-of-00001.parquet", "main/test-00000-of-00001.parquet")


def gsm8k_source() -> ArtifactStep[PromptData]:
    """GSM8K as published (question, answer), pinned to a hub commit, checksummed at staging."""
    return hf_dataset_source("data/gsm8k-hub", "openai/gsm8k", GSM8K_COMMIT, files=GSM8K_FILES)


# The conversion reads both splits into memory on one CPU node, in the fsdp runtime (its pyarrow); no accelerator.
CONVERSION = StepExecution(runtime=RUNTIME, cpu=16.0, memory="64GB", disk="200GB", time_limit_seconds=3600)
# The evaluation generates with the trained 8B policy on one node of the cluster's H100s.
EVALUATION = StepExecution(
    runtime=RUNTIME, accelerators=8, accelerator_type="H100", cpu=96.0, memory="1600GB", disk="4TB",
    time_limit_seconds=2 * 3600,
)  # fmt: skip


# Appended to every question: SkyRL's gsm8k environment scores the number after `####`.
INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'


def gsm8k() -> ArtifactStep[PromptData]:
    """The pinned rows in SkyRL's prompt format (chat `prompt`, `env_class`, `reward_spec`): the
    fields the fsdp runtime reads, which the preflight checks in the rows this step records."""
    source = gsm8k_source()
    return ArtifactStep(
        name="data/gsm8k",
        version=resolve_version("data/gsm8k", None),
        artifact_type=PromptData,
        run=convert_gsm8k,
        build_config=lambda ctx: {
            "output_path": ctx.output_path,
            "source": ctx.artifact_path(source),
            "splits": {"train.parquet": GSM8K_FILES[0], "test.parquet": GSM8K_FILES[1]},
            "instruction": INSTRUCTION,
        },
        deps=(source,),
        execution=CONVERSION,
    )


def convert_gsm8k(config: dict[str, Any]) -> PromptData:
    """Convert the staged snapshot in the fsdp runtime (pyarrow is there, not in rlaunch) and publish it."""
    splits = [f"--split={target}={pattern}" for target, pattern in config["splits"].items()]
    with tempfile.TemporaryDirectory() as tmp:
        runtime_tool(
            RUNTIME, "rlaunch_skyrl.gsm8k", "--source", config["source"], "--out", tmp,
            "--instruction", config["instruction"], *splits,
        )  # fmt: skip
        publish(tmp, config["output_path"])
    return PromptData(path=config["output_path"])  # records each split's rows and columns


def topology(broken: bool, variant: str) -> SkyRLTopology:
    """The 64-GPU plan, or one node of 24 GB L4s with every role colocated on it."""
    if variant == "64-gpu":
        return SkyRLTopology(num_nodes=8, gpus_per_node=8, gpu_variant="H100", role_plan=role_plan(broken))
    gpus = 4 if variant == "one-node-24gb" else 8
    plan = SkyRLRolePlan(
        colocate_all=True,
        policy_num_nodes=1,
        policy_num_gpus_per_node=gpus,
        num_inference_engines=gpus,
        inference_engine_tensor_parallel_size=1,
        inference_engine_pipeline_parallel_size=1,
        inference_engine_data_parallel_size=1,
        inference_engine_expert_parallel_size=1,
        train_batch_size=256,
        policy_mini_batch_size=64,
        micro_train_batch_size_per_gpu=2,
        n_samples_per_prompt=8,
    )
    return SkyRLTopology(num_nodes=1, gpus_per_node=gpus, gpu_variant="L4", role_plan=plan)


def recipe(variant: str) -> str:
    if variant != "long-generation-24gb":
        return RECIPE
    return RECIPE.replace("max_generate_length: 3072", "max_generate_length: 31744")


def role_plan(broken: bool) -> SkyRLRolePlan:
    return SkyRLRolePlan(
        colocate_all=False,
        policy_num_nodes=4,
        policy_num_gpus_per_node=8,
        num_inference_engines=4,
        inference_engine_tensor_parallel_size=1,
        inference_engine_pipeline_parallel_size=1,
        inference_engine_data_parallel_size=1 if broken else 8,
        inference_engine_expert_parallel_size=1,
        train_batch_size=250 if broken else 256,
        policy_mini_batch_size=64,
        micro_train_batch_size_per_gpu=3 if broken else 2,
        n_samples_per_prompt=8,
    )


def smoke_role_plan() -> SkyRLRolePlan:
    """The large plan's geometry at its smallest: the same placement class and engine shape, one of each."""
    return SkyRLRolePlan(
        colocate_all=False,
        policy_num_nodes=1,
        policy_num_gpus_per_node=8,
        num_inference_engines=1,
        inference_engine_tensor_parallel_size=1,
        inference_engine_pipeline_parallel_size=1,
        inference_engine_data_parallel_size=8,
        inference_engine_expert_parallel_size=1,
        train_batch_size=16,
        policy_mini_batch_size=8,
        micro_train_batch_size_per_gpu=2,
        n_samples_per_prompt=8,
    )


def execution(node_hours: int) -> IrisSkyRLExecution:
    """Every host resource stated (readiness marks a default `[default]`), for the coordinator too."""
    return IrisSkyRLExecution(
        cluster="cw-example",
        cluster_config="lib/iris/config/cw-example.yaml",
        cpu=96,
        memory="1600GB",
        disk="4TB",
        priority="interactive",
        max_retries=2,
        coordinator_cpu=4.0,
        coordinator_memory="16GB",
        coordinator_disk="64GB",
        coordinator_timeout_hours=node_hours + 12,
        job_timeout_seconds=node_hours * 3600,
        wandb_entity="my-lab",
    )


def smoke_step() -> SkyRLArtifactStep:
    """The GPU smoke that rehearses the large run: two nodes, four steps, everything else the same."""
    model, data = pretrained_model(), gsm8k()
    spec = SkyRLSpec(
        name="checkpoints/gsm8k-grpo-qwen3-8b-smoke",
        version=resolve_version("checkpoints/gsm8k-grpo-qwen3-8b-smoke", None),
        config_yaml=RECIPE.replace("ckpt_interval: 20", "ckpt_interval: 2\n  max_training_steps: 4"),
        runtime=SkyRLRuntime(RUNTIME),
        model=ArtifactHfModel(model, tokenizer_revision=QWEN3_8B_COMMIT),
        train_data=(ArtifactDataSource(data, "train.parquet"),),
        validation_data=(ArtifactDataSource(data, "test.parquet"),),
        topology=SkyRLTopology(num_nodes=2, gpus_per_node=8, gpu_variant="H100", role_plan=smoke_role_plan()),
        retention=SkyRLRetentionPolicy(resume_checkpoint_count=2),
        seed=17,
    )
    why = "two nodes are the smallest shape of this geometry: disaggregated roles take whole nodes"
    return skyrl_step(spec, execution(node_hours=2), export_hf=True, is_smoke=True, waivers={"large": why})


def rl_step(broken: bool, variant: str = "64-gpu") -> SkyRLArtifactStep:
    model, data = pretrained_model(), gsm8k()
    spec = SkyRLSpec(
        name="checkpoints/gsm8k-grpo-qwen3-8b",
        version=resolve_version("checkpoints/gsm8k-grpo-qwen3-8b", None),
        config_yaml=recipe(variant),
        runtime=SkyRLRuntime(RUNTIME),
        model=ArtifactHfModel(model, tokenizer_revision=QWEN3_8B_COMMIT),
        train_data=(ArtifactDataSource(data, "train.parquet"),),
        validation_data=(ArtifactDataSource(data, "test.parquet"),),
        topology=topology(broken, variant),
        retention=SkyRLRetentionPolicy(resume_checkpoint_count=2),
        seed=17,
    )
    smoke = smoke_step() if variant == "64-gpu" else None  # the 24 GB variants never get past the preflight
    return skyrl_step(spec, execution(node_hours=36), export_hf=True, smoke=smoke)


def evaluation(rl: SkyRLArtifactStep) -> ArtifactStep[EvalReport]:
    """Score the RL run's export on the converted test split, greedily, on the evaluation's GPUs,
    answering as it trained (the recipe's max_generate_length)."""
    return evaluation_step(
        rl,
        gsm8k(),
        name="evals/gsm8k-grpo-qwen3-8b/gsm8k-test",
        version=resolve_version("evals/gsm8k-grpo-qwen3-8b", None),
        split="test.parquet",
        execution=EVALUATION,
        sampling=Sampling(max_new_tokens=3072),
        scorer="gsm8k",
    )


@click.command()
@click.option(
    "--stage",
    type=click.Choice(["smoke", "rl", "evaluation"]),
    required=True,
    help="Terminal stage to plan or run (chosen, never defaulted); its dependencies are included automatically.",
)
@click.option("--broken", is_flag=True, help="Plan the broken variant to see every violation at once.")
@click.option(
    "--variant",
    type=click.Choice(VARIANTS),
    default="64-gpu",
    show_default=True,
    help="The 64-GPU plan, or a 24 GB-GPU variant whose memory cannot fit (refused before anything runs).",
)
@rl_build_options
def main(stage: str, broken: bool, variant: str) -> ArtifactStep:
    if stage == "smoke":
        return smoke_step()
    rl = rl_step(broken, variant)
    return rl if stage == "rl" else evaluation(rl)


if __name__ == "__main__":
    main()
