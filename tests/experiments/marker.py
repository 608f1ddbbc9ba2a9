"""A launchable RL experiment on the `test-marker` runtime: the real coordinator/host/child path
in seconds. Needs RLAUNCH_RUNTIME_PLUGINS=tests.plugins.marker_runtime.

    python -m tests.experiments.marker --version 2026.11.30 --run [--scenario ok] [--replicas 1] [--backend ray]
    python -m tests.experiments.marker --version 2026.11.30 --run --step-job [--step-job-needs FILE]

`--step-job` adds `marker/count`, a step job after the RL step that counts the staged data's rows
(with `--step-job-needs FILE` it fails until FILE exists: a failed step job to relaunch; with
`--step-job-waits-for FILE` it runs until FILE exists: a step job to cancel).

`--model-shards N` adds N small weight shards to the marker model (a model whose staging takes
seconds: a run to cancel while it stages).

`--backend ray` submits through `RaySkyRLExecution` to the cluster at $RAY_ADDRESS (placement only:
the plan's fingerprints are the same for both backends).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

import click

from rlaunch import storage
from rlaunch.artifacts import Artifact, ArtifactStep, resolve_version
from rlaunch.cli import rl_build_options
from rlaunch.launch_config.schema import RaySection
from rlaunch.skyrl import (
    ArtifactDataSource,
    ArtifactHfModel,
    HfModel,
    IrisSkyRLExecution,
    LocalSkyRLExecution,
    PromptData,
    RaySkyRLExecution,
    SkyRLExecution,
    SkyRLRolePlan,
    SkyRLRuntime,
    SkyRLSpec,
    SkyRLTopology,
    SlurmSkyRLExecution,
    skyrl_step,
)
from rlaunch.step_jobs import StepExecution

RECIPE = """
trainer:
  max_training_steps: %(steps)d
  max_prompt_length: 32
  ckpt_interval: 2
  hf_save_interval: -1
  resume_mode: %(resume_mode)s
  logger: console
generator:
  sampling_params: {max_generate_length: 8}
environment:
  env_class: %(scenario)s
"""


def write_model(config: dict[str, Any]) -> HfModel:
    files = {
        "config.json": json.dumps({"num_attention_heads": 4, "max_position_embeddings": 128}),
        "tokenizer.json": "{}",
        **{f"shards/model-{i:05d}.safetensors": f"shard {i}\n" * 64 for i in range(config.get("shards", 0))},
    }
    for name, text in files.items():
        storage.write_text_atomic(storage.join(config["output_path"], name), text)
    return HfModel(path=config["output_path"], num_attention_heads=4, context_length=128)


def write_data(config: dict[str, Any]) -> PromptData:
    rows = [
        {"prompt": [{"role": "user", "content": f"What is {i} + 1?"}], "reward_spec": {"ground_truth": str(i + 1)}}
        for i in range(8)
    ]
    storage.write_text_atomic(
        storage.join(config["output_path"], "train.jsonl"), "\n".join(map(json.dumps, rows)) + "\n"
    )
    return PromptData(path=config["output_path"])  # records each split's rows and fields


def execution(backend: str, ray_port: int | None = None) -> SkyRLExecution:
    """Sized for a laptop or the 4-CPU test cluster: 1 CPU per node, 1 CPU for the coordinator."""
    sizes = {
        "memory": "1GB",
        "disk": "1GB",
        "coordinator_cpu": 1.0,
        "coordinator_memory": "1GB",
        "coordinator_disk": "1GB",
    }
    ray = {"ray": RaySection(port=ray_port)} if ray_port else {}
    if backend == "ray":
        return RaySkyRLExecution(cpu=1.0, **sizes, **ray)
    if backend == "iris":  # the controller at $IRIS_CONTROLLER_URL (Iris sets it inside its tasks)
        return IrisSkyRLExecution(controller_url=os.environ["IRIS_CONTROLLER_URL"], cpu=1.0, **sizes, **ray)
    if backend == "slurm":  # the cluster $SLURM_CONF names
        return SlurmSkyRLExecution(cpu=1.0, **sizes, **ray)
    return LocalSkyRLExecution(**sizes, **ray)


def _built_here(name: str, artifact_type: type[Any], write: Any, **config: Any) -> ArtifactStep:
    """An input the marker experiment writes itself (`write` gets `{"output_path": ..., **config}`)."""
    return ArtifactStep(
        name=name,
        version=resolve_version(name, None),
        artifact_type=artifact_type,
        run=write,
        build_config=lambda ctx: {"output_path": ctx.output_path, **config},
    )


def marker_rl(
    name: str = "marker/rl",
    *,
    backend: str = "local",
    scenario: str = "ok",
    runtime: str = "test-marker",
    steps: int = 4,
    ray_port: int | None = None,
    replicas: int = 1,
    export: bool = True,
    train_batch: int = 2,
    resume_mode: str = "latest",
    smoke: Any = None,
    model_shards: int = 0,
) -> ArtifactStep:
    """An RL step on a marker runtime over the shared marker model and data."""
    model = _built_here("marker/model", HfModel, write_model, **({"shards": model_shards} if model_shards else {}))
    data = _built_here("marker/data", PromptData, write_data)
    plan = SkyRLRolePlan(
        colocate_all=True, policy_num_nodes=replicas, policy_num_gpus_per_node=1, num_inference_engines=replicas,
        inference_engine_tensor_parallel_size=1, inference_engine_pipeline_parallel_size=1,
        inference_engine_data_parallel_size=1, inference_engine_expert_parallel_size=1,
        train_batch_size=train_batch, policy_mini_batch_size=2, micro_train_batch_size_per_gpu=1, n_samples_per_prompt=2,
    )  # fmt: skip
    spec = SkyRLSpec(
        name=name,
        version=resolve_version(name, None),
        config_yaml=RECIPE % {"steps": steps, "scenario": scenario, "resume_mode": resume_mode},
        runtime=SkyRLRuntime(runtime),
        model=ArtifactHfModel(model, tokenizer_revision="marker-rev"),
        train_data=(ArtifactDataSource(data, "train.jsonl"),),
        topology=SkyRLTopology(num_nodes=replicas, gpus_per_node=1, gpu_variant="cpu", role_plan=plan),
        seed=7,
    )
    return skyrl_step(spec, execution(backend, ray_port), export_hf=export, smoke=smoke)


@dataclass(frozen=True)
class Count(Artifact):
    rows: int = 0
    data: str = ""


def count_rows(config: dict[str, Any]) -> Count:
    """Runs in a step job: the data path is the task's staged copy."""
    if config["needs"] and not os.path.exists(config["needs"]):
        raise KeyError("prompt")  # a data-format error, as a trainer would raise it
    waited = 0
    while config["waits_for"] and not os.path.exists(config["waits_for"]) and waited < 600:
        time.sleep(0.2)  # a step job that runs until the test ends it
        waited += 1
    with open(config["data"], encoding="utf-8") as handle:
        rows = len(handle.read().splitlines())
    storage.write_text_atomic(storage.join(config["output_path"], "count.txt"), str(rows))
    return Count(path=config["output_path"], rows=rows, data=config["data"])


def count_step(rl: ArtifactStep, needs: str | None, waits_for: str | None = None) -> ArtifactStep:
    """A step job after the RL step, on the coordinator's backend, sized for the test clusters."""
    data = rl.spec.train_data[0].step
    return ArtifactStep(
        name="marker/count",
        version=resolve_version("marker/count", None),
        artifact_type=Count,
        run=count_rows,
        build_config=lambda ctx: {
            "output_path": ctx.output_path,
            "data": storage.join(ctx.artifact_path(data), "train.jsonl"),
            "needs": needs,
            "waits_for": waits_for,
        },
        deps=(rl, data),
        execution=StepExecution(cpu=1.0, memory="512MB", disk="512MB", time_limit_seconds=300),
    )


@click.command()
@click.option(
    "--backend",
    type=click.Choice(["local", "ray", "iris", "slurm"]),
    default="local",
    show_default=True,
    help="Where the coordinator and child job run (ray: $RAY_ADDRESS; iris: $IRIS_CONTROLLER_URL; slurm: $SLURM_CONF).",
)
@click.option("--scenario", default="ok", show_default=True)
@click.option(
    "--runtime", default="test-marker", show_default=True, help="test-marker, or test-ray-driver (a Ray driver)."
)
@click.option("--steps", default=4, show_default=True)
@click.option("--ray-port", type=int, default=None, help="The gang's Ray GCS port (test-ray-driver; default 6379).")
@click.option("--replicas", default=1, show_default=True, help="Nodes of the child gang (1 device slot each).")
@click.option("--export/--no-export", default=True)
@click.option("--model-shards", default=0, show_default=True, help="Extra small weight files of the marker model.")
@click.option("--step-job", is_flag=True, help="Add marker/count, a step job after the RL step.")
@click.option("--step-job-needs", default=None, help="The step job fails until this file exists.")
@click.option("--step-job-waits-for", default=None, help="The step job runs until this file exists.")
@rl_build_options
def main(step_job: bool, step_job_needs: str | None, step_job_waits_for: str | None, **options: Any) -> ArtifactStep:
    """The marker RL step the options describe (each option is a keyword of `marker_rl`)."""
    rl = marker_rl(**options)
    return count_step(rl, step_job_needs, step_job_waits_for) if step_job else rl


if __name__ == "__main__":
    main()
