"""The multi-node rehearsal: real SkyRL 0.4.0 on a 2-node x 2-logical-GPU gang of this CPU machine.

    python -m experiments.rehearsal --version 2026.11.30 --run

Runs `skyrl.train.entrypoints.main_base` (runtime `fsdp-rehearsal`: the fsdp runtime's adapter on
the contract lock, Python 3.12, no CUDA build) through rlaunch's whole launch path: document,
preflight, host, local child gang of two nodes, staging, one Ray cluster across both nodes (each
declares 2 logical GPUs with `ray start --num-gpus=2`). SkyRL validates its config, attaches to
that cluster, loads the tokenizer and the parquet data, and places its colocated placement group
(4 bundles of 1 GPU) across both nodes; then its FSDP worker imports a GPU-only module
(flash_attn) and stops. The head records that stop as the expected end of a rehearsal: it checks
in Ray's placement-group table that SkyRL's group spans both nodes' logical GPUs and writes
`rehearsal.json` into the attempt directory; the run ends `rehearsed` and the CLI prints the
report. About 7 minutes on 2 cores; the contract venv is built once (tests/contract/skyrl).

Nothing comes from a hub: the tokenizer (byte-level BPE) and the tiny Qwen3 are built here with
the smoke's steps, and the data is a parquet file of arithmetic prompts in SkyRL's prompt format.
The local machine is declared to have the 4 logical GPUs (RLAUNCH_LOCAL_ACCELERATORS, default
here) of the declared variant `logical`; a GPU runtime needs a GPU variant, and this is the
honest name for what Ray is told.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
from typing import Any

import click

from experiments.smoke import model_step, publish, tokenizer_step
from rlaunch.artifacts import ArtifactStep, resolve_version
from rlaunch.cli import rl_build_options
from rlaunch.launch_config.schema import RaySection
from rlaunch.skyrl import (
    ArtifactDataSource,
    ArtifactHfModel,
    HfModel,
    LocalSkyRLExecution,
    PromptData,
    SkyRLRolePlan,
    SkyRLRuntime,
    SkyRLSpec,
    SkyRLTopology,
    skyrl_step,
)
from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep

RUNTIME = "fsdp-rehearsal"
NODES, GPUS_PER_NODE = 2, 2
GPU_VARIANT = "logical"  # what `ray start --num-gpus` declares on a CPU machine
CPUS_PER_NODE = 3.0  # logical CPUs per node for Ray: 2 bundles of {GPU: 1, CPU: 1} + SkyRL's entrypoint task (1 CPU)
RECIPE = """
trainer:
  algorithm: {advantage_estimator: grpo}
  max_training_steps: 1
  max_prompt_length: 64
  ckpt_interval: 1
  hf_save_interval: -1
  resume_mode: none
  logger: console
generator:
  sampling_params: {max_generate_length: 16}
environment:
  env_class: gsm8k
"""
PARQUET = """
import json, sys
import pyarrow as pa, pyarrow.parquet as pq
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
pq.write_table(pa.Table.from_pylist(rows), sys.argv[2])
"""


def build_dataset(config: dict[str, Any]) -> PromptData:
    """`train.parquet` and `validation.parquet` in SkyRL's prompt format (chat `prompt`, `env_class`,
    `reward_spec`), written by pyarrow inside the rehearsal runtime's environment."""
    from rlaunch.runtimes.environment import ensure_environment
    from rlaunch.runtimes.registry import get_profile

    env = ensure_environment(get_profile(RUNTIME), progress=lambda line: print(line, file=sys.stderr, flush=True))
    rng = random.Random(config["seed"])
    with tempfile.TemporaryDirectory() as tmp:
        for split, count in config["splits"].items():
            rows = []
            for _ in range(count):
                a, b = rng.randint(0, 9), rng.randint(0, 9)
                rows.append({
                    "prompt": [{"role": "user", "content": f"What is {a} + {b}? Answer after ####."}],
                    "env_class": "gsm8k",
                    "reward_spec": {"method": "rule", "ground_truth": str(a + b)},
                })  # fmt: skip
            source = os.path.join(tmp, f"{split}.jsonl")
            with open(source, "w", encoding="utf-8") as handle:
                handle.writelines(json.dumps(row) + "\n" for row in rows)
            subprocess.run(
                [env.python, "-c", PARQUET, source, os.path.join(tmp, f"{split}.parquet")],
                env=env.process_env({}, inherit=True),
                check=True,
            )
            os.remove(source)
        publish(tmp, config["output_path"])
    return PromptData(path=config["output_path"])  # records each split's rows and fields


def dataset_step() -> ArtifactStep[PromptData]:
    return ArtifactStep(
        name="rehearsal/arithmetic",
        version=resolve_version("rehearsal/arithmetic", None),
        artifact_type=PromptData,
        run=build_dataset,
        build_config=lambda ctx: {"output_path": ctx.output_path, "seed": 0, "splits": {"train": 16, "validation": 4}},
    )


def role_plan() -> SkyRLRolePlan:
    """Colocated across both nodes: policy on all 4 logical GPUs, one TP1 engine per GPU."""
    gpus = NODES * GPUS_PER_NODE
    return SkyRLRolePlan(
        colocate_all=True,
        policy_num_nodes=NODES,
        policy_num_gpus_per_node=GPUS_PER_NODE,
        num_inference_engines=gpus,
        inference_engine_tensor_parallel_size=1,
        inference_engine_pipeline_parallel_size=1,
        inference_engine_data_parallel_size=1,
        inference_engine_expert_parallel_size=1,
        train_batch_size=gpus,
        policy_mini_batch_size=gpus,
        micro_train_batch_size_per_gpu=1,
        n_samples_per_prompt=2,
    )


def rl_step(model: ArtifactStep[HfModel], data: ArtifactStep[PromptData], ray_port: int) -> SkyRLArtifactStep:
    name = "rehearsal/rl"
    spec = SkyRLSpec(
        name=name,
        version=resolve_version(name, None),
        config_yaml=RECIPE,
        runtime=SkyRLRuntime(RUNTIME),
        model=ArtifactHfModel(model, tokenizer_revision="smoke-bpe-512-seed0"),
        train_data=(ArtifactDataSource(data, "train.parquet"),),
        validation_data=(ArtifactDataSource(data, "validation.parquet"),),
        topology=SkyRLTopology(
            num_nodes=NODES, gpus_per_node=GPUS_PER_NODE, gpu_variant=GPU_VARIANT, role_plan=role_plan()
        ),
        seed=0,
    )
    execution = LocalSkyRLExecution(
        cpu=CPUS_PER_NODE,
        memory="6GB",
        disk="10GB",
        ray=RaySection(port=ray_port, cluster_join_timeout_seconds=600, rendezvous_timeout_seconds=600),
    )
    return skyrl_step(spec, execution, export_hf=False)


@click.command()
@click.option("--ray-port", type=int, default=6379, show_default=True, help="The gang's Ray GCS port.")
@rl_build_options
def main(ray_port: int) -> ArtifactStep[Any]:
    # The local machine's declaration: the logical GPUs the gang's nodes give Ray, and the logical
    # CPUs they declare (a declaration, not a claim on cores: the nodes share this machine's cores).
    os.environ.setdefault("RLAUNCH_LOCAL_ACCELERATORS", str(NODES * GPUS_PER_NODE))
    os.environ.setdefault("RLAUNCH_LOCAL_CPUS", f"{NODES * CPUS_PER_NODE:g}")
    return rl_step(model_step(tokenizer_step()), dataset_step(), ray_port)


if __name__ == "__main__":
    main()
