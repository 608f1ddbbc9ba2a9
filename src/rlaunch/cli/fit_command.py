"""`rlaunch fit --model MODEL --gpu H100 --gpus 8`: does this plan fit, and pass the preflight?

`fit` is the preflight without an experiment: it states a plan from its flags (the allocation, the
policy's nodes, colocated or disaggregated engines of a TP x DP, a reference, a critic, the batch
sizes and the token budget), fills its printed defaults into the recipe (`--recipe`, else
SkyRL's defaults), and judges it with `check_plan`: the whole rule set the dry run applies, so
the codes it prints are the dry run's. It prints the per-GPU memory table (`rlaunch.rules.memory`),
every violation with its fix, and for a plan whose memory is refused, over or tight, the nearest
plans that fit (`rlaunch.rules.fit`), each checked by the same rules before it is printed; with
`--host-memory` an offload that the node's host memory cannot hold is not offered.

MODEL is a `config.json`, a directory holding one, or `module:attr`, the model step of an experiment
(an `hf_model_source(..., config=...)` step, an `ArtifactHfModel`, or a function returning either:
`experiments.rl_plan_example:pretrained_model`), whose declared config.json is read; nothing is
fetched. Exit 0 when every row fits and the preflight passes, 1 when not.
"""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rlaunch.dotted import get_path, set_path
from rlaunch.errors import UserError
from rlaunch.launch_config.recipe_keys import ALGORITHM, SAMPLING, TRAINER
from rlaunch.rules.devices import GIB

if TYPE_CHECKING:  # pragma: no cover
    from rlaunch.skyrl import ModelFacts, SkyRLTopology

# The settings `fit` writes into a recipe that lacks them: its token budget, and the explicit
# settings the preflight asks of every recipe (they decide nothing of memory).
RECIPE_DEFAULTS = {
    TRAINER.MAX_PROMPT_LENGTH: 1024,
    SAMPLING.MAX_GENERATE_LENGTH: 3072,
    TRAINER.CKPT_INTERVAL: 20,
    TRAINER.HF_SAVE_INTERVAL: -1,
    TRAINER.RESUME_MODE: "latest",
    TRAINER.LOGGER: "console",
}
PROMPT, GENERATE = TRAINER.MAX_PROMPT_LENGTH, SAMPLING.MAX_GENERATE_LENGTH
NEAREST = ". Nearest plans that fit: "
# The flags with a fixed default, printed when the default is used.
DEFAULTED_FLAGS = (
    "nodes", "engine_tp", "engine_dp", "train_batch_size", "mini_batch_size", "micro_batch_size", "n_samples", "runtime"
)  # fmt: skip
FIT_VERSION = "fit-dev"  # the version a model step's builder is given (nothing is built or stored)


@dataclass(frozen=True)
class Model:
    """A model's config.json and where it was read from (for messages)."""

    config: dict[str, Any]
    source: str


@click.command("fit")
@click.option(
    "--model",
    "model_source",
    required=True,
    help="A config.json, a directory holding one, or module:attr (a model step of an experiment).",
)
@click.option(
    "--gpu", "gpu_variant", required=True, help="The GPU (the device table's name: H100, A100-80GB, L4, ...)."
)
@click.option("--gpus", "gpus_per_node", required=True, type=click.IntRange(min=1), help="GPUs per node.")
@click.option("--nodes", default=1, show_default=True, type=click.IntRange(min=1), help="Nodes allocated.")
@click.option(
    "--colocate/--disaggregate",
    default=True,
    show_default=True,
    help="Every role on the policy's GPUs, or engines (and a critic) on nodes of their own.",
)
@click.option(
    "--policy-nodes",
    type=click.IntRange(min=1),
    default=None,
    help="The policy's nodes  [default: every node colocated, half of them (at least 1) disaggregated]",
)
@click.option(
    "--engine-tp", default=1, show_default=True, type=click.IntRange(min=1), help="Engine tensor parallel size."
)
@click.option(
    "--engine-dp", default=1, show_default=True, type=click.IntRange(min=1), help="Engine data parallel size."
)
@click.option(
    "--engines",
    type=click.IntRange(min=1),
    default=None,
    help="Inference engines  [default: as many as fill the rollout GPUs]",
)
@click.option(
    "--prompt-length",
    type=click.IntRange(min=1),
    default=None,
    help="trainer.max_prompt_length  [default: the recipe's, else 1024]",
)
@click.option(
    "--generate-length",
    type=click.IntRange(min=1),
    default=None,
    help="generator.sampling_params.max_generate_length  [default: the recipe's, else 3072]",
)
@click.option(
    "--train-batch-size",
    default=256,
    show_default=True,
    type=click.IntRange(min=1),
    help="Prompts per training step (role_plan.train_batch_size).",
)
@click.option(
    "--mini-batch-size",
    default=64,
    show_default=True,
    type=click.IntRange(min=1),
    help="Prompts per optimizer step (policy_mini_batch_size; a critic's too).",
)
@click.option(
    "--micro-batch-size",
    default=2,
    show_default=True,
    type=click.IntRange(min=1),
    help="Sequences per GPU per forward/backward (micro_train_batch_size_per_gpu).",
)
@click.option(
    "--n-samples",
    default=8,
    show_default=True,
    type=click.IntRange(min=1),
    help="Samples per prompt (n_samples_per_prompt).",
)
@click.option(
    "--reference/--no-reference",
    default=None,
    help="A reference model (trainer.algorithm.use_kl_loss)  [default: the recipe's, else SkyRL's: on]",
)
@click.option("--critic", is_flag=True, help="Add a critic (PPO with GAE): on the policy's GPUs, or its own nodes.")
@click.option(
    "--host-memory",
    "host_memory_gib",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Host memory per node, GiB: an offload needing more is not offered  [default: not known]",
)
@click.option("--recipe", type=click.Path(dir_okay=False), default=None, help="A SkyRL recipe (config_yaml) to size.")
@click.option("--runtime", default="fsdp", show_default=True, help="The runtime profile.")
@click.pass_context
def fit(ctx: click.Context, /, **options: Any) -> None:
    """Does this plan fit on NODES x GPUS GPU for MODEL, and pass the preflight? The per-GPU memory
    table, every violation `check_plan` finds (the dry run's rules), and when it does not fit, the
    nearest plans that do. Prints the defaults it used."""
    from rlaunch.skyrl import ModelFacts, check_plan
    from rlaunch.skyrl.views.memory_fit import memory_report, nearest_fits, render, render_nearest_fits

    model = _read_model(options["model_source"])
    facts = ModelFacts.from_hf_config(model.config)
    topology, tree, defaults = _plan_of(ctx, options)
    host = None if options["host_memory_gib"] is None else int(options["host_memory_gib"] * GIB)
    click.echo(_heading(model, facts, topology, tree))
    click.echo("defaults used: " + ("; ".join(defaults) if defaults else "none"))
    report = memory_report(topology, tree, options["runtime"], facts, host_memory_bytes=host)
    for line in render(report.table):
        click.echo(line)
    found = check_plan(topology, tree, options["runtime"], model=facts, host_memory_bytes=host)
    click.echo(f"the preflight (check_plan): {len(found)} violation(s)")
    for v in found:
        click.echo(f"  {v}")
    statuses = {r.status for r in report.table.rows}
    sized = report.table.device is not None
    if sized and statuses == {"ok"} and not found:
        click.echo("fits: every row is ok and the preflight passes")
        return
    if not sized:
        click.echo("not sized: " + "; ".join(report.table.unsized))
    elif statuses != {"ok"}:
        worst = next(s for s in ("REFUSED", "over (estimate)", "tight") if s in statuses)
        click.echo(f"does not fit as asked ({worst}).")
        if not any(NEAREST in v.fix for v in found):  # a refusal's fix names them already
            lines = render_nearest_fits(nearest_fits(topology, tree, options["runtime"], facts, host_memory_bytes=host))
            click.echo("\n".join(lines) if lines else "no nearest plan within the search fits")
    else:
        click.echo("fits in memory, but the preflight refuses the plan (above).")
    raise SystemExit(1)


def _plan_of(ctx: click.Context, options: dict[str, Any]) -> tuple[SkyRLTopology, dict[str, Any], list[str]]:
    """The topology and recipe the flags describe, and each default used (as `--flag value` or `key=value`)."""
    from rlaunch.skyrl import SkyRLCriticPlan, SkyRLRolePlan, SkyRLTopology

    nodes, gpus = options["nodes"], options["gpus_per_node"]
    colocate, tp, dp = options["colocate"], options["engine_tp"], options["engine_dp"]
    policy_nodes = options["policy_nodes"] or (nodes if colocate else max(1, nodes // 2))
    critic_nodes = 0 if colocate or not options["critic"] else policy_nodes
    rollout_gpus = policy_nodes * gpus if colocate else (nodes - policy_nodes - critic_nodes) * gpus
    engines = options["engines"] or max(1, rollout_gpus // (tp * dp))
    mini = options["mini_batch_size"]
    critic_plan = (policy_nodes if colocate else critic_nodes, gpus, mini)
    plan = SkyRLRolePlan(
        colocate_all=colocate,
        policy_num_nodes=policy_nodes,
        policy_num_gpus_per_node=gpus,
        num_inference_engines=engines,
        inference_engine_tensor_parallel_size=tp,
        inference_engine_pipeline_parallel_size=1,
        inference_engine_data_parallel_size=dp,
        inference_engine_expert_parallel_size=1,
        train_batch_size=options["train_batch_size"],
        policy_mini_batch_size=mini,
        micro_train_batch_size_per_gpu=options["micro_batch_size"],
        n_samples_per_prompt=options["n_samples"],
        critic=SkyRLCriticPlan(*critic_plan) if options["critic"] else None,
    )
    topology = SkyRLTopology(num_nodes=nodes, gpus_per_node=gpus, gpu_variant=options["gpu_variant"], role_plan=plan)
    tree = _read_recipe(options["recipe"])
    for key, flag in ((PROMPT, "prompt_length"), (GENERATE, "generate_length")):
        if options[flag] is not None:
            set_path(tree, key, options[flag])
    if options["reference"] is not None:
        set_path(tree, ALGORITHM.USE_KL_LOSS, options["reference"])
        if not options["reference"]:
            set_path(tree, ALGORITHM.USE_KL_IN_REWARD, False)
    if options["critic"]:
        set_path(tree, ALGORITHM.ADVANTAGE_ESTIMATOR, "gae")
    defaults = [
        f"--{name.replace('_', '-')} {ctx.params[name]}"
        for name in DEFAULTED_FLAGS
        if ctx.get_parameter_source(name) is click.core.ParameterSource.DEFAULT
    ]
    defaults += [] if options["policy_nodes"] else [f"--policy-nodes {policy_nodes}"]
    defaults += [] if options["engines"] else [f"--engines {engines}"]
    for key, value in RECIPE_DEFAULTS.items():
        if get_path(tree, key, None) is None:
            set_path(tree, key, value)
            defaults.append(f"{key}={value}")
    if options["reference"] is None and get_path(tree, ALGORITHM.USE_KL_LOSS, None) is None:
        defaults.append("--reference as SkyRL's trainer.algorithm.use_kl_loss (on)")
    if options["host_memory_gib"] is None:
        defaults.append("--host-memory not known (each offload plan says what it needs)")
    return topology, tree, defaults


def _heading(model: Model, facts: ModelFacts, topology: SkyRLTopology, tree: dict[str, Any]) -> str:
    """The plan in one line: the model, the allocation, the layout, the engines and the token budget."""
    from rlaunch.rules.model_shape import Architecture

    plan = topology.role_plan
    arch = facts.architecture
    size = f"{arch.params.total / 1e9:.2f}B parameters" if isinstance(arch, Architecture) else "not sized"
    heads = f", {facts.num_attention_heads} heads" if facts.num_attention_heads else ""
    layout = "every role colocated" if plan.colocate_all else "engines on nodes of their own"
    engines = (
        f"{plan.num_inference_engines} engine(s) x TP{plan.inference_engine_tensor_parallel_size}"
        f" x DP{plan.inference_engine_data_parallel_size}"
    )
    tokens = f"{get_path(tree, PROMPT, '?')} + {get_path(tree, GENERATE, '?')} tokens"
    return (
        f"{model.source} ({size}{heads}) on {topology.num_nodes} node(s) x {topology.gpus_per_node} "
        f"{topology.gpu_variant}, {layout}: policy {plan.policy_num_nodes} node(s), {engines}, "
        f"micro batch {plan.micro_train_batch_size_per_gpu}, {tokens}{', a critic' if plan.critic else ''}:"
    )


def _read_model(source: str) -> Model:
    """The config.json `source` names: a file, a directory holding one, or `module:attr`."""
    path = Path(source)
    if path.is_dir():
        path = path / "config.json"
    if path.is_file():
        return Model(_read_json(source, path), source)
    if ":" in source and not path.exists():
        return _model_step(source)
    raise UserError(
        f"--model {source}: no such config.json or directory; pass a config.json, a directory holding "
        "one, or module:attr naming a model step (experiments.rl_plan_example:pretrained_model)"
    )


def _read_json(source: str, path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"--model {source}: cannot read a config.json: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"--model {source}: a config.json is a JSON object, got {type(data).__name__}")
    return data


def _model_step(source: str) -> Model:
    """The config.json a model step of an experiment declares (`module:attr`; the module is imported
    as `python -m` would, from the working directory)."""
    from rlaunch.artifacts import ArtifactStep, BuildContext, VersionCodex, build_context
    from rlaunch.sources.inputs import ArtifactHfModel, declared_architecture

    module_name, _, attr = source.partition(":")
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        found = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"--model {source}: cannot import it: {exc}") from None
    if callable(found) and not isinstance(found, ArtifactStep):
        # a builder that resolves its version from the build context gets a placeholder: the
        # config.json it declares does not depend on it
        with build_context(BuildContext(VersionCodex(FIT_VERSION))):
            try:
                found = found()
            except (TypeError, ValueError) as exc:
                raise UserError(f"--model {source}: calling it with no arguments failed: {exc}") from None
    step = found.step if isinstance(found, ArtifactHfModel) else found
    if not isinstance(step, ArtifactStep):
        raise UserError(f"--model {source}: not a model step (an ArtifactStep or ArtifactHfModel): {found!r}")
    config = declared_architecture(step)
    if config is None:
        raise UserError(
            f"--model {source}: the step {step.name} declares no config.json; pass config= to "
            "hf_model_source (a derived model: FromBase or FromConfig in its build config), or pass the model's "
            "config.json or directory"
        )
    return Model(config, f"{source} ({step.name})")


def _read_recipe(path: str | None) -> dict[str, Any]:
    if path is None:
        return {}
    from rlaunch.skyrl.values.config_yaml import parse_config_yaml

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--recipe {path}: cannot read it: {exc}") from None
    return parse_config_yaml(text)
