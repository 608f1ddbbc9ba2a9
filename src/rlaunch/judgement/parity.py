"""Smoke parity: does a smoke rehearse the large run it stands for?

The seed: "Before a large launch, run a smoke through the same strategy, artifact handoffs, and
role geometry." A `RunShape` is what must match between the two, read from a launch document (the
one an RL step would launch, or a stored one); `differences(smoke, large)` names every mismatch,
each a `Difference` of a kind and a field. This table is the whole comparison (docs/concepts.md
repeats it):

| kind | fields compared | why a smoke must match |
|---|---|---|
| runtime | profile, source digest | the same code runs |
| model | family (`model_type`), layers, hidden size, attention heads, KV heads, vocabulary, MLP width, routed experts, read from each model's recorded `config.json`; where either model records no architecture `rlaunch.rules.model_shape` reads, the model artifact's name (`artifact`) | a 0.6B model does not rehearse an 8B one; the same architecture under another name or version does |
| accelerator | accelerator type (`cluster.allocation.gpu_variant`, by its device-table name) | an A100 smoke does not rehearse H100 kernels, memory or attention backend |
| strategy | trainer strategy, the policy's model-parallel sharding | the same training code path |
| entrypoint | standard or fully_async | the same trainer loop |
| algorithm | advantage estimator, KL loss (`use_kl_loss`), KL in the reward (`use_kl_in_reward`), policy loss (`policy_loss_type`) | the same losses and the same models in memory |
| lengths | max prompt length, max generate length | sequence lengths decide activation and KV memory and generation time |
| hand-offs | the graph behind the inputs (`inputs.graph`: artifact types, recursively, names and versions erased), the model artifact's type, each data source's type and file | the same artifacts are staged the same way |
| geometry | placement (colocated or disaggregated), engine TP, PP, EP and DP, reference model on or off, critic (none, colocated or dedicated) | the same role layout and weight sync |
| checkpoint | whether checkpoints are written, resume_mode | the same save and resume path |
| export | the terminal Hugging Face export, periodic exports | the same export path |
| memory | CPU offload of policy, reference and critic, gradient checkpointing, LoRA, the engine's KV-cache dtype, eager mode | where memory goes (how much is scale: `rlaunch parity` prints both runs' per-GPU tables beside each other and does not compare them) |

Allowed to differ by design (scale): node count, GPUs per node, engine count, batch sizes (train,
mini, micro, samples per prompt), steps and intervals, the model's version and artifact name where
both record their architecture, run names, paths, seeds and host resources.

`smoke_parity` is the smoke gate's one parity verdict: a launch against the document its declared
smoke's latest attempt ran. The judgement (`rlaunch.judgement.judge`) refuses on its words and the
plan's smoke gate shows the same verdict, so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rlaunch.judgement.gates import smoke_not_run
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.geometry import Geometry
from rlaunch.launch_config.recipe_keys import ALGORITHM, ENGINE, ROLE, SAMPLING, TRAINER, role_key
from rlaunch.launch_config.schema import ModelInput, SkyRLLaunchConfig
from rlaunch.rules.devices import device
from rlaunch.rules.model_shape import Architecture, from_hf_config
from rlaunch.runtimes.registry import get_profile

KINDS = (
    "runtime",
    "model",
    "accelerator",
    "strategy",
    "algorithm",
    "lengths",
    "handoffs",
    "geometry",
    "checkpoint",
    "export",
    "memory",
)
MODEL_NAME = "artifact"  # the model's artifact name: compared only where a model records no architecture


@dataclass(frozen=True)
class Difference:
    kind: str
    field: str
    smoke: Any
    large: Any

    def line(self) -> str:
        return f"[{self.kind}] {self.field}: smoke {self.smoke!r}, large {self.large!r}"


@dataclass(frozen=True)
class RunShape:
    """What a smoke must share with the run it rehearses, kind by kind (the module docstring's table)."""

    identity: str
    runtime: Mapping[str, Any]
    model: Mapping[str, Any]
    accelerator: Mapping[str, Any]
    strategy: Mapping[str, Any]
    entrypoint: str
    algorithm: Mapping[str, Any]
    lengths: Mapping[str, Any]
    handoffs: Mapping[str, Any]
    geometry: Mapping[str, Any]
    checkpoint: Mapping[str, Any]
    export: Mapping[str, Any]
    memory: Mapping[str, Any]

    @classmethod
    def of(cls, document: SkyRLLaunchConfig, composed: Mapping[str, Any], geo: Geometry, identity: str) -> RunShape:
        """The shape of `document`, whose recipe composed to `composed` with geometry `geo`."""
        runtime, inputs = document.runtime, document.inputs
        recipe = recipe_shape(composed, geo, runtime.profile)
        return cls(
            identity=identity,
            runtime={"profile": runtime.profile, "source_digest": runtime.source_digest},
            model=_model(inputs.model),
            accelerator={"accelerator type": _accelerator(document.cluster.allocation.gpu_variant)},
            entrypoint=runtime.entrypoint,
            handoffs={
                "graph": tuple(inputs.graph),
                "model": inputs.model.artifact_type,
                "train data": tuple((d.artifact_type, d.relative_path) for d in inputs.train_data),
                "validation data": tuple((d.artifact_type, d.relative_path) for d in inputs.validation_data),
            },
            export={"export_hf": bool(document.run.export_hf), **recipe.pop("export")},
            **recipe,
        )


def recipe_shape(composed: Mapping[str, Any], geo: Geometry, profile: str) -> dict[str, dict[str, Any]]:
    """What parity compares that the recipe alone decides (strategy, algorithm, lengths, geometry,
    checkpoint, periodic export, memory), kind by kind: `RunShape.of` reads it, and a sweep asks it
    whether a swept value changes what a smoke must rehearse (`recipe_differences`)."""
    canonical = get_profile(profile).canonical_strategy(geo.strategy)
    interval = get_path(composed, TRAINER.CKPT_INTERVAL)
    hf_interval = get_path(composed, TRAINER.HF_SAVE_INTERVAL)
    return {
        "strategy": {
            TRAINER.STRATEGY: canonical,
            "policy model parallel": geo.megatron_policy if canonical == "megatron" else (geo.policy_sp,),
        },
        "algorithm": {
            "advantage estimator": get_path(composed, ALGORITHM.ADVANTAGE_ESTIMATOR, None),
            "KL loss": bool(get_path(composed, ALGORITHM.USE_KL_LOSS, False)),
            "KL in reward": bool(get_path(composed, ALGORITHM.USE_KL_IN_REWARD, False)),
            "policy loss": get_path(composed, ALGORITHM.POLICY_LOSS_TYPE, None),
        },
        "lengths": {
            "max prompt length": get_path(composed, TRAINER.MAX_PROMPT_LENGTH, None),
            "max generate length": get_path(composed, SAMPLING.MAX_GENERATE_LENGTH, None),
        },
        "geometry": {
            "placement": "colocated" if geo.colocate_all else "disaggregated",
            "engine TP": geo.tp,
            "engine PP": geo.pp,
            "engine EP": geo.ep,
            "engine DP": geo.dp,
            "reference model": geo.use_reference,
            "critic": None if not geo.use_critic else "colocated" if geo.colocate_all else "dedicated",
        },
        "checkpoint": {
            "checkpoints written": isinstance(interval, int) and interval > 0,
            "resume_mode": get_path(composed, TRAINER.RESUME_MODE),
        },
        "export": {"periodic HF export": isinstance(hf_interval, int) and hf_interval > 0},
        "memory": _memory_switches(composed),
    }


def recipe_differences(profile: str, recipe: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """`kind.field` of everything parity compares that differs between two rendered recipes of the
    runtime `profile` (empty: one smoke rehearses both)."""
    runtime = get_profile(profile)
    shapes = []
    for each in (recipe, other):
        composed, _ = runtime.compose(dict(each))
        shapes.append(recipe_shape(composed, Geometry.from_recipe(composed), profile))
    mine, theirs = shapes
    return [
        f"{kind}.{name}"
        for kind in mine
        for name in sorted(set(mine[kind]) | set(theirs[kind]))
        if mine[kind].get(name) != theirs[kind].get(name)
    ]


def _model(model: ModelInput) -> dict[str, Any]:
    """The model's artifact name and, when its recorded `config.json` states an architecture this
    repository reads (`rules.model_shape`), that architecture's shape facts."""
    name = model.identity.strip("<>").partition("@")[0]
    architecture = from_hf_config(model.hf_config) if model.hf_config else None
    if not isinstance(architecture, Architecture):
        return {MODEL_NAME: name}
    return {
        MODEL_NAME: name,
        "family": architecture.model_type,
        "layers": architecture.layers,
        "hidden size": architecture.hidden,
        "attention heads": architecture.heads,
        "KV heads": architecture.kv_heads,
        "vocabulary": architecture.vocab,
        "MLP width": architecture.intermediate,
        "routed experts": architecture.experts,
    }


def _accelerator(gpu_variant: str) -> str:
    """The accelerator by its device-table name (`h100` is `H100`); a name the table lacks as written."""
    known = device(gpu_variant)
    return known.name if known is not None else gpu_variant


def _memory_switches(composed: Mapping[str, Any]) -> dict[str, Any]:
    """The settings that change where memory goes (not how much): a smoke must run the same ones."""

    def on(key: str) -> bool:
        return bool(get_path(composed, key, False))

    lora = get_path(composed, role_key("policy", ROLE.LORA_RANK), 0)
    return {
        "policy CPU offload": on(role_key("policy", ROLE.FSDP_CPU_OFFLOAD)),
        "reference CPU offload": on(role_key("ref", ROLE.FSDP_CPU_OFFLOAD)),
        "critic CPU offload": on(role_key("critic", ROLE.FSDP_CPU_OFFLOAD)),
        "gradient checkpointing": on(TRAINER.GRADIENT_CHECKPOINTING),
        "LoRA": isinstance(lora, int) and lora > 0,
        "engine KV cache dtype": get_path(composed, ENGINE.KV_CACHE_DTYPE, "auto"),
        "engine eager mode": on(ENGINE.ENFORCE_EAGER),
    }


def shape_of_document(document: SkyRLLaunchConfig, identity: str | None = None) -> RunShape:
    """The shape of the run a launch document describes (a launched one: a stored smoke's)."""
    composed, _ = get_profile(document.runtime.profile).compose(document.skyrl)
    return RunShape.of(document, composed, Geometry.from_recipe(composed), identity or _identity(document))


def shape_of_planned(planned: PlannedLaunch, identity: str | None = None) -> RunShape:
    """`shape_of_document` of a planned launch, from the recipe and geometry it derived once."""
    geometry = planned.geometry or Geometry.from_recipe(planned.composed)
    return RunShape.of(planned.document, planned.composed, geometry, identity or _identity(planned.document))


def _identity(document: SkyRLLaunchConfig) -> str:
    return document.run.artifact or document.run.id


def differences(smoke: RunShape, large: RunShape) -> list[Difference]:
    """Every way `large` differs from its `smoke` in what a smoke must rehearse (empty: parity holds)."""
    out: list[Difference] = []
    for kind in KINDS:
        mine, theirs = getattr(smoke, kind), getattr(large, kind)
        for key in _compared(kind, mine, theirs):
            if mine.get(key) != theirs.get(key):
                out.append(Difference(kind, key, mine.get(key), theirs.get(key)))
    if smoke.entrypoint != large.entrypoint:
        out.append(Difference("entrypoint", "entrypoint", smoke.entrypoint, large.entrypoint))
    return out


def _compared(kind: str, smoke: Mapping[str, Any], large: Mapping[str, Any]) -> list[str]:
    """The fields of `kind` compared: every field either run has; two models by their architecture
    where both record one (another name or version of it rehearses it), else by their artifact names."""
    fields = sorted(set(smoke) | set(large))
    if kind != "model":
        return fields
    if "family" in smoke and "family" in large:
        return [f for f in fields if f != MODEL_NAME]
    return [MODEL_NAME]


@dataclass(frozen=True)
class SmokeParity:
    """The smoke gate's parity verdict: the launch against the document its declared smoke's latest
    attempt ran (`smoke_parity`)."""

    identity: str  # the declared smoke
    ran: bool  # the smoke has a recorded attempt
    readable: bool  # the document its latest attempt ran could be read
    differences: tuple[Difference, ...] = ()

    @property
    def holds(self) -> bool:
        return self.ran and self.readable and not self.differences

    def problems(self) -> list[str]:
        """Why parity does not open the gate, in the judgement's words (empty: it holds)."""
        if not self.ran:
            return [smoke_not_run(self.identity)]
        if not self.readable:
            return [
                f"parity with smoke {self.identity} cannot be judged: no launch document of its latest attempt "
                "can be read (the run record's resolved_config_uri or launch_document_uri, or its artifact "
                "record); rerun the smoke"
            ]
        return [f"parity with smoke {self.identity}: {d.line()}" for d in self.differences]


def smoke_parity(
    planned: PlannedLaunch,
    identity: str,
    attempts: Sequence[Mapping[str, Any]],
    document: SkyRLLaunchConfig | None,
) -> SmokeParity:
    """Parity of `planned` with its declared smoke `identity`, whose recorded `attempts` and the
    `document` its latest attempt ran storage holds (`rlaunch.observe.launch_evidence`): the one
    verdict the judgement refuses on and the plan's smoke gate shows."""
    if not attempts:
        return SmokeParity(identity, ran=False, readable=False)
    if document is None:
        return SmokeParity(identity, ran=True, readable=False)
    found = differences(shape_of_document(document), shape_of_planned(planned))
    return SmokeParity(identity, ran=True, readable=True, differences=tuple(found))
