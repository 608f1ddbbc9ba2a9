"""`rlaunch fit --model config.json --gpu H100 --gpus 8`: what fits on N x GPU for this model?

The plan asked about is the simplest one the allocation holds: every role colocated on all its
GPUs (the policy, and with `--critic` a critic, over every GPU, one engine per `--engine-tp` GPUs),
with the recipe's settings
(`--recipe`, else SkyRL's defaults and a 1024 + 3072-token budget) and the stated batch sizes. It
is sized by the same memory model as the plan of an experiment (`rlaunch.rules.memory`): the
per-GPU table, then either that it fits, or the nearest plans that do (`rlaunch.rules.fit`), each
as the role-plan and recipe changes to write into the spec. Pure: reads the two files, no I/O
beyond, no torch or transformers. Exit 0 when the plan fits, 1 when it does not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from rlaunch.errors import UserError

DEFAULT_BUDGET = {
    "trainer": {"max_prompt_length": 1024},
    "generator": {"sampling_params": {"max_generate_length": 3072}},
}


@click.command("fit")
@click.option(
    "--model", "model_config", required=True, type=click.Path(dir_okay=False), help="The model's config.json."
)
@click.option("--gpu", "gpu_variant", required=True, help="The GPU variant (the device table's name: H100, L4, ...).")
@click.option("--gpus", "gpus_per_node", required=True, type=click.IntRange(min=1), help="GPUs per node.")
@click.option("--nodes", default=1, show_default=True, type=click.IntRange(min=1), help="Nodes.")
@click.option("--recipe", type=click.Path(dir_okay=False), default=None, help="A SkyRL recipe (config_yaml) to size.")
@click.option("--runtime", default="fsdp", show_default=True, help="The runtime profile.")
@click.option(
    "--engine-tp", default=1, show_default=True, type=click.IntRange(min=1), help="Engine tensor parallel size."
)
@click.option("--train-batch-size", default=256, show_default=True, type=click.IntRange(min=1))
@click.option("--mini-batch-size", default=64, show_default=True, type=click.IntRange(min=1))
@click.option("--micro-batch-size", default=2, show_default=True, type=click.IntRange(min=1))
@click.option("--n-samples", default=8, show_default=True, type=click.IntRange(min=1))
@click.option("--critic", is_flag=True, help="Add a critic (PPO with GAE) on the policy's GPUs, with its mini batch.")
def fit(
    model_config: str,
    gpu_variant: str,
    gpus_per_node: int,
    nodes: int,
    recipe: str | None,
    runtime: str,
    engine_tp: int,
    train_batch_size: int,
    mini_batch_size: int,
    micro_batch_size: int,
    n_samples: int,
    critic: bool,
) -> None:
    """What fits on NODES x GPUS GPU for this model: the per-GPU memory of the colocated plan, and
    if it does not fit, the nearest plans that do."""
    from rlaunch.rules.model_shape import Architecture
    from rlaunch.skyrl import ModelFacts, SkyRLCriticPlan, SkyRLRolePlan, SkyRLTopology
    from rlaunch.skyrl.views.memory_fit import memory_report, nearest_fits, render, render_nearest_fits

    model = ModelFacts.from_hf_config(_read_json(model_config))
    if not isinstance(model.architecture, Architecture):
        reason = model.architecture.reason if model.architecture is not None else "no architecture"
        raise UserError(f"--model {model_config}: cannot size this model: {reason}")
    world = nodes * gpus_per_node
    if world % engine_tp:
        raise UserError(f"--engine-tp {engine_tp} must divide the {world} GPUs; pick a divisor of {world}")
    plan = SkyRLRolePlan(
        colocate_all=True,
        policy_num_nodes=nodes,
        policy_num_gpus_per_node=gpus_per_node,
        num_inference_engines=world // engine_tp,
        inference_engine_tensor_parallel_size=engine_tp,
        inference_engine_pipeline_parallel_size=1,
        inference_engine_data_parallel_size=1,
        inference_engine_expert_parallel_size=1,
        train_batch_size=train_batch_size,
        policy_mini_batch_size=mini_batch_size,
        micro_train_batch_size_per_gpu=micro_batch_size,
        n_samples_per_prompt=n_samples,
        critic=SkyRLCriticPlan(nodes, gpus_per_node, mini_batch_size) if critic else None,
    )
    topology = SkyRLTopology(num_nodes=nodes, gpus_per_node=gpus_per_node, gpu_variant=gpu_variant, role_plan=plan)
    tree = _read_recipe(recipe)
    report = memory_report(topology, tree, runtime, model)
    params = model.architecture.params.total / 1e9
    click.echo(
        f"{model.architecture.model_type} ({params:.2f}B parameters) on {nodes} node(s) x {gpus_per_node} "
        f"{gpu_variant}, every role colocated, {world // engine_tp} engine(s) x TP{engine_tp}, "
        f"micro batch {micro_batch_size}{', a critic' if critic else ''}:"
    )
    for line in render(report.table):
        click.echo(line)
    if report.table.device is None:
        raise UserError("cannot size this plan: " + "; ".join(report.table.unsized))
    statuses = {r.status for r in report.table.rows}
    if statuses == {"ok"}:
        click.echo("fits: every row is ok")
        return
    found = nearest_fits(topology, tree, runtime, model)
    worst = next(s for s in ("REFUSED", "over (estimate)", "tight") if s in statuses)
    click.echo(f"does not fit as asked ({worst}).")
    lines = render_nearest_fits(found)
    click.echo("\n".join(lines) if lines else "no nearest plan within the search fits: try a larger GPU or more nodes")
    raise SystemExit(1)


def _read_json(path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"--model {path}: cannot read a config.json: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"--model {path}: a config.json is a JSON object, got {type(data).__name__}")
    return data


def _read_recipe(path: str | None) -> dict[str, Any]:
    if path is None:
        return dict(json.loads(json.dumps(DEFAULT_BUDGET)))
    from rlaunch.skyrl.values.config_yaml import parse_config_yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--recipe {path}: cannot read it: {exc}") from None
    return parse_config_yaml(text)
