"""The CPU smoke: a real RL launch, end to end, on this machine.

    python -m experiments.smoke --version 2026.11.30 --run                  # train + evaluate
    python -m experiments.smoke --version 2026.11.30 --stage rl --run       # train only
    python -m experiments.smoke --version 2026.11.30 --slots 2              # plan a 2-process run
    RAY_ADDRESS=http://127.0.0.1:8265 python -m experiments.smoke --version 2026.11.30 --backend ray --run
    IRIS_CONTROLLER_URL=http://127.0.0.1:PORT python -m experiments.smoke --version 2026.11.30 --backend iris --run
    python -m experiments.smoke --version 2026.11.30 --backend slurm --run   # from a Slurm login node

Steps: a byte-level BPE tokenizer trained here, a tiny random-init Qwen3 (records its heads and
context length), a synthetic arithmetic dataset with ground truth, the RL step (TRL GRPO through
the `trl-cpu` runtime, colocated, 1 node, 1 or 2 device slots) and an evaluation of the export on
the validation split. The evaluation is the library's (`rlaunch.evaluation.evaluation_step`, scored
by the arithmetic verifier), a step job (`StepExecution`): a child job of the coordinator on the
same backend, which stages the export and the data by identity and reports accuracy with its 95%
interval clustered by prompt, the samples, and which model and data it scored
(`rlaunch status smoke/eval@VERSION` shows it). Tokenizer,
model and evaluation run inside the trl-cpu runtime environment (built once from its lock, then
reused); rlaunch itself never imports torch.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from dataclasses import dataclass
from typing import Any

import click

from rlaunch import evaluation, storage
from rlaunch.artifacts import Artifact, ArtifactStep, resolve_version
from rlaunch.cli import rl_build_options
from rlaunch.evaluation import EvalReport, Sampling
from rlaunch.experiment_code import ExperimentCode
from rlaunch.runtimes.environment import runtime_tool
from rlaunch.skyrl import (
    ArtifactDataSource,
    ArtifactHfModel,
    FromConfig,
    HfModel,
    IrisSkyRLExecution,
    LocalSkyRLExecution,
    PromptData,
    RaySkyRLExecution,
    SkyRLExecution,
    SkyRLRetentionPolicy,
    SkyRLRolePlan,
    SkyRLRun,
    SkyRLRuntime,
    SkyRLSpec,
    SkyRLTopology,
    SlurmSkyRLExecution,
    skyrl_step,
)
from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep
from rlaunch.step_jobs import StepExecution

RUNTIME = "trl-cpu"
TOKENIZER_REVISION = "smoke-bpe-512-seed0"
TOKENIZER_VOCAB = 512
RECIPE = """
trainer:
  algorithm: {advantage_estimator: grpo, use_kl_loss: true, kl_loss_coef: 0.04}
  policy:
    optimizer_config: {lr: 1.0e-3}
  max_training_steps: %(steps)d
  max_prompt_length: 64
  ckpt_interval: 2
  hf_save_interval: -1
  resume_mode: latest
  logger: console
generator:
  sampling_params: {max_generate_length: 16, temperature: 1.0}
environment:
  env_class: arithmetic
"""


@dataclass(frozen=True)
class Tokenizer(Artifact):
    vocab_size: int = 0
    files: dict[str, str] | None = None


def publish(local_dir: str, output_path: str) -> None:
    """Copy a locally built directory to the artifact's output path (any fsspec URL)."""
    fs, root = storage.filesystem(output_path)
    for name in sorted(os.listdir(local_dir)):
        fs.put_file(os.path.join(local_dir, name), f"{root}/{name}")


def build_tokenizer(config: dict[str, Any]) -> Tokenizer:
    with tempfile.TemporaryDirectory() as tmp:
        info = runtime_tool(
            RUNTIME,
            "rlaunch_trl_cpu.tiny",
            "tokenizer",
            "--out",
            tmp,
            "--seed",
            str(config["seed"]),
            "--vocab-size",
            str(config["vocab_size"]),
        )
        publish(tmp, config["output_path"])
    return Tokenizer(path=config["output_path"], vocab_size=config["vocab_size"], files=info.get("files"))


def build_model(config: dict[str, Any]) -> HfModel:
    with tempfile.TemporaryDirectory() as tmp:
        tok, out = os.path.join(tmp, "tokenizer"), os.path.join(tmp, "model")
        fs, root = storage.filesystem(config["tokenizer_path"])
        fs.get(root, tok, recursive=True)
        arch = config["architecture"]
        info = runtime_tool(
            RUNTIME, "rlaunch_trl_cpu.tiny", "model", "--tokenizer", tok, "--out", out, "--seed", str(config["seed"]),
            "--hidden-size", str(arch["hidden_size"]), "--layers", str(arch["layers"]), "--heads", str(arch["heads"]),
            "--kv-heads", str(arch["kv_heads"]), "--context-length", str(arch["context_length"]),
        )  # fmt: skip
        with open(os.path.join(out, "config.json"), encoding="utf-8") as handle:
            hf_config = json.load(handle)  # the record carries it: the plan sizes memory from it
        publish(out, config["output_path"])
    return HfModel(
        path=config["output_path"],
        num_attention_heads=info["num_attention_heads"],
        context_length=info["max_position_embeddings"],
        files=info["files"],
        hf_config=hf_config,
    )


def build_dataset(config: dict[str, Any]) -> PromptData:
    rng = random.Random(config["seed"])
    for split, rows in config["splits"].items():
        lines = []
        for _ in range(rows):
            a, b = rng.randint(0, config["max_operand"]), rng.randint(0, config["max_operand"])
            lines.append(json.dumps({
                "prompt": [{"role": "user", "content": f"What is {a} + {b}?"}],
                "env_class": "arithmetic",
                "reward_spec": {"method": "rule", "ground_truth": str(a + b)},
            }))  # fmt: skip
        storage.write_text_atomic(storage.join(config["output_path"], f"{split}.jsonl"), "\n".join(lines) + "\n")
    return PromptData(path=config["output_path"])  # records each split's rows and fields


def tokenizer_step() -> ArtifactStep[Tokenizer]:
    return ArtifactStep(
        name="smoke/tokenizer",
        version=resolve_version("smoke/tokenizer", None),
        artifact_type=Tokenizer,
        run=build_tokenizer,
        build_config=lambda ctx: {"output_path": ctx.output_path, "seed": 0, "vocab_size": TOKENIZER_VOCAB},
    )


def tiny_qwen3_config(architecture: dict[str, int], vocab_size: int) -> dict[str, Any]:
    """The config.json `rlaunch_trl_cpu.tiny model` writes for `architecture`: declared by the model
    step, so the dry run sizes every launch of it (and of models trained from it) before it is built,
    and the runner checks the built model against it."""
    hidden, heads = architecture["hidden_size"], architecture["heads"]
    return {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "dtype": "float32",
        "vocab_size": vocab_size,
        "hidden_size": hidden,
        "intermediate_size": hidden * 2,
        "num_hidden_layers": architecture["layers"],
        "num_attention_heads": heads,
        "num_key_value_heads": architecture["kv_heads"],
        "head_dim": hidden // heads,
        "max_position_embeddings": architecture["context_length"],
        "tie_word_embeddings": True,
    }


def model_step(tokenizer: ArtifactStep[Tokenizer]) -> ArtifactStep[HfModel]:
    architecture = {"hidden_size": 64, "layers": 2, "heads": 4, "kv_heads": 2, "context_length": 512}
    declared = FromConfig(tiny_qwen3_config(architecture, vocab_size=TOKENIZER_VOCAB))
    return ArtifactStep(
        name="smoke/model",
        version=resolve_version("smoke/model", None),
        artifact_type=HfModel,
        run=build_model,
        build_config=lambda ctx: {
            "output_path": ctx.output_path,
            "tokenizer_path": ctx.artifact_path(tokenizer),
            "seed": 0,
            "architecture": architecture,
            **declared.declaration(ctx),
        },
        deps=(tokenizer,),
    )


def dataset_step(
    name: str = "smoke/arithmetic", max_operand: int = 9, splits: dict[str, int] | None = None, seed: int = 0
) -> ArtifactStep[PromptData]:
    """Sums `a + b` with operands up to `max_operand`, `splits` rows each (the smoke's: 64 and 16)."""
    rows = splits or {"train": 64, "validation": 16}
    return ArtifactStep(
        name=name,
        version=resolve_version(name, None),
        artifact_type=PromptData,
        run=build_dataset,
        build_config=lambda ctx: {
            "output_path": ctx.output_path,
            "seed": seed,
            "max_operand": max_operand,
            "splits": rows,
        },
    )


def role_plan(slots: int, train_batch: int = 4) -> SkyRLRolePlan:
    """Colocated on one node: one engine per device slot, `train_batch` prompts x four samples per step."""
    return SkyRLRolePlan(
        colocate_all=True,
        policy_num_nodes=1,
        policy_num_gpus_per_node=slots,
        num_inference_engines=slots,
        inference_engine_tensor_parallel_size=1,
        inference_engine_pipeline_parallel_size=1,
        inference_engine_data_parallel_size=1,
        inference_engine_expert_parallel_size=1,
        train_batch_size=train_batch,
        policy_mini_batch_size=4,
        micro_train_batch_size_per_gpu=4,
        n_samples_per_prompt=4,
    )


def execution(backend: str, slots: int) -> SkyRLExecution:
    """Where the RL step runs; placement only, so every choice gives the same fingerprints."""
    # A cluster's coordinator is sized as stated here (the local backend's defaults are the same).
    sized: dict[str, Any] = dict(
        cpu=float(slots),
        memory="4GB",
        disk="10GB",
        coordinator_cpu=1.0,
        coordinator_memory="2GB",
        coordinator_disk="10GB",
    )
    if backend == "ray":  # the cluster at $RAY_ADDRESS, this checkout uploaded as the working dir
        return RaySkyRLExecution(**sized)
    if backend == "iris":  # the controller at $IRIS_CONTROLLER_URL (inside an Iris task, Iris sets it)
        url = os.environ.get("IRIS_CONTROLLER_URL")
        if not url:
            raise click.UsageError("--backend iris needs IRIS_CONTROLLER_URL=http://<controller>:<port>")
        return IrisSkyRLExecution(controller_url=url, **sized)
    if backend == "slurm":  # the cluster $SLURM_CONF names (or Slurm's default), its default partition
        return SlurmSkyRLExecution(**sized)
    return LocalSkyRLExecution(cpu=float(slots), memory="4GB", disk="10GB")


def rl_step(
    model: ArtifactStep[HfModel],
    data: ArtifactStep[PromptData],
    slots: int,
    steps: int,
    backend: str = "local",
    *,
    name: str = "smoke/rl",
    train_batch: int = 4,
    smoke: SkyRLArtifactStep | None = None,
    recipe: str = RECIPE,
    roles: SkyRLRolePlan | None = None,
    seed: int = 0,
    code: ExperimentCode | None = None,
    reward: str | None = None,
    is_smoke: bool = False,
) -> SkyRLArtifactStep:
    """The RL step; `experiments.cpu_scaled` reuses it for a larger run of the same shape,
    `experiments.learning` with its own recipe (`%(steps)d` in it) and role plan, and
    `experiments.custom_reward` with its own reward function (`reward`, shipped as `code`);
    `is_smoke` declares it another launch's smoke."""
    spec = SkyRLSpec(
        name=name,
        version=resolve_version(name, None),
        config_yaml=recipe % {"steps": steps},
        runtime=SkyRLRuntime(RUNTIME),
        model=ArtifactHfModel(model, tokenizer_revision=TOKENIZER_REVISION),
        train_data=(ArtifactDataSource(data, "train.jsonl"),),
        validation_data=(ArtifactDataSource(data, "validation.jsonl"),),
        topology=SkyRLTopology(
            num_nodes=1, gpus_per_node=slots, gpu_variant="cpu", role_plan=roles or role_plan(slots, train_batch)
        ),
        retention=SkyRLRetentionPolicy(resume_checkpoint_count=2, temporary_storage_ttl_days=7),
        seed=seed,
        code=code,
        reward=reward,
    )
    return skyrl_step(spec, execution(backend, slots), export_hf=True, smoke=smoke, is_smoke=is_smoke)


# The evaluation's step job: one CPU in the trl-cpu runtime, on the coordinator's backend.
EVALUATION = StepExecution(runtime=RUNTIME, cpu=1.0, memory="4GB", disk="10GB", time_limit_seconds=1800)
GREEDY = Sampling(max_new_tokens=16)


def evaluation_step(
    model: ArtifactStep[SkyRLRun] | ArtifactStep[HfModel],
    data: ArtifactStep[PromptData],
    *,
    name: str = "smoke/eval",
    sampling: Sampling = GREEDY,
) -> ArtifactStep[EvalReport]:
    """Score `model` (an RL run's export, or an HF model as it is) on the data's validation split
    with the arithmetic verifier, greedily unless `sampling` says otherwise."""
    return evaluation.evaluation_step(
        model, data, name=name, split="validation.jsonl", execution=EVALUATION, sampling=sampling, scorer="arithmetic"
    )


@click.command()
@click.option(
    "--backend",
    type=click.Choice(["local", "ray", "iris", "slurm"]),
    default="local",
    show_default=True,
    help="Where the RL step's coordinator and child job run (ray: $RAY_ADDRESS; iris: $IRIS_CONTROLLER_URL; "
    "slurm: the cluster $SLURM_CONF names).",
)
@click.option(
    "--stage",
    type=click.Choice(["rl", "evaluation"]),
    default="evaluation",
    show_default=True,
    help="Terminal stage; its dependencies are included automatically.",
)
@click.option(
    "--slots",
    type=click.IntRange(1, 2),
    default=1,
    show_default=True,
    help="CPU device slots (training processes) on the one node.",
)
@click.option(
    "--steps",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Optimizer steps (trainer.max_training_steps).",
)
@rl_build_options
def main(backend: str, stage: str, slots: int, steps: int) -> ArtifactStep[Any]:
    data = dataset_step()
    rl = rl_step(model_step(tokenizer_step()), data, slots, steps, backend)
    return rl if stage == "rl" else evaluation_step(rl, data)


if __name__ == "__main__":
    main()
