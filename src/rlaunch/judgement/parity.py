"""Smoke parity: does a smoke rehearse the large run it stands for?

The seed: "Before a large launch, run a smoke through the same strategy, artifact handoffs, and
role geometry." A `RunShape` is what must match between the two, read from an RL step in memory
or from a stored launch document; `differences(smoke, large)` names every mismatch. Scale may
differ (node count, GPUs per node, engine count, batch sizes, steps, intervals); these may not:

* runtime   - profile and source digest (the same code runs);
* strategy  - the trainer strategy and the policy's model-parallel sharding;
* entrypoint - standard or fully_async;
* hand-offs - the shape of the graph behind the run's inputs (the document's `inputs.graph`:
  artifact types, recursively, names and versions erased), the model artifact's type, and each
  data source's type and file;
* geometry  - colocated or disaggregated, TP/PP/EP/DP of one engine, reference model on or off,
  the critic (none, colocated or on its own nodes);
* checkpoint - whether checkpoints are written and how a relaunch resumes;
* export    - the terminal Hugging Face export and whether periodic exports are written;
* memory    - where memory goes: CPU offload of policy, reference and critic, gradient checkpointing,
  LoRA, the engine's KV-cache dtype and eager mode (how much each run needs is scale: `rlaunch
  parity` prints both runs' per-GPU tables beside each other, and does not compare them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.geometry import FULLY_ASYNC, Geometry
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.runtimes.registry import get_profile


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
    identity: str
    runtime: Mapping[str, Any]
    strategy: Mapping[str, Any]
    entrypoint: str
    handoffs: Mapping[str, Any]
    geometry: Mapping[str, Any]
    checkpoint: Mapping[str, Any]
    export: Mapping[str, Any]
    memory: Mapping[str, Any]

    @classmethod
    def of(
        cls,
        identity: str,
        profile: str,
        digest: str,
        entrypoint: str,
        composed: Mapping[str, Any],
        geo: Geometry,
        export_hf: bool,
        handoffs: Mapping[str, Any],
    ) -> RunShape:
        canonical = get_profile(profile).canonical_strategy(geo.strategy)
        interval = get_path(composed, "trainer.ckpt_interval")
        hf_interval = get_path(composed, "trainer.hf_save_interval")
        return cls(
            identity=identity,
            runtime={"profile": profile, "source_digest": digest},
            strategy={
                "trainer.strategy": canonical,
                "policy model parallel": geo.megatron_policy if canonical == "megatron" else (geo.policy_sp,),
            },
            entrypoint=FULLY_ASYNC if entrypoint == FULLY_ASYNC else entrypoint,
            handoffs=handoffs,
            geometry={
                "placement": "colocated" if geo.colocate_all else "disaggregated",
                "engine TP": geo.tp,
                "engine PP": geo.pp,
                "engine EP": geo.ep,
                "engine DP": geo.dp,
                "reference model": geo.use_reference,
                "critic": None if not geo.use_critic else "colocated" if geo.colocate_all else "dedicated",
            },
            checkpoint={
                "checkpoints written": isinstance(interval, int) and interval > 0,
                "resume_mode": get_path(composed, "trainer.resume_mode"),
            },
            export={
                "export_hf": bool(export_hf),
                "periodic HF export": isinstance(hf_interval, int) and hf_interval > 0,
            },
            memory=_memory_switches(composed),
        )


def _memory_switches(composed: Mapping[str, Any]) -> dict[str, Any]:
    """The settings that change where memory goes (not how much): a smoke must run the same ones."""

    def on(key: str) -> bool:
        return bool(get_path(composed, key, False))

    lora = get_path(composed, "trainer.policy.model.lora.rank", 0)
    return {
        "policy CPU offload": on("trainer.policy.fsdp_config.cpu_offload"),
        "reference CPU offload": on("trainer.ref.fsdp_config.cpu_offload"),
        "critic CPU offload": on("trainer.critic.fsdp_config.cpu_offload"),
        "gradient checkpointing": on("trainer.gradient_checkpointing"),
        "LoRA": isinstance(lora, int) and lora > 0,
        "engine KV cache dtype": get_path(
            composed, "generator.inference_engine.engine_init_kwargs.kv_cache_dtype", "auto"
        ),
        "engine eager mode": on("generator.inference_engine.enforce_eager"),
    }


def shape_of_document(document: SkyRLLaunchConfig, identity: str | None = None) -> RunShape:
    """The shape of the run a launch document describes (a launched one: a stored smoke's)."""
    composed, _ = get_profile(document.runtime.profile).compose(document.skyrl)
    return _shape(document, composed, Geometry.from_recipe(composed), identity)


def shape_of_planned(planned: PlannedLaunch, identity: str | None = None) -> RunShape:
    """`shape_of_document` of a planned launch, from the recipe and geometry it derived once."""
    geometry = planned.geometry or Geometry.from_recipe(planned.composed)
    return _shape(planned.document, planned.composed, geometry, identity)


def _shape(
    document: SkyRLLaunchConfig, composed: Mapping[str, Any], geometry: Geometry, identity: str | None
) -> RunShape:
    inputs = document.inputs
    return RunShape.of(
        identity or document.run.artifact or document.run.id,
        document.runtime.profile,
        document.runtime.source_digest,
        document.runtime.entrypoint,
        composed,
        geometry,
        document.run.export_hf,
        {
            "graph": tuple(inputs.graph),
            "model": inputs.model.artifact_type,
            "train data": tuple((d.artifact_type, d.relative_path) for d in inputs.train_data),
            "validation data": tuple((d.artifact_type, d.relative_path) for d in inputs.validation_data),
        },
    )


def differences(smoke: RunShape, large: RunShape) -> list[Difference]:
    """Every way `large` differs from its `smoke` in what a smoke must rehearse (empty: parity holds)."""
    out: list[Difference] = []
    for kind in ("runtime", "strategy", "handoffs", "geometry", "checkpoint", "export", "memory"):
        mine, theirs = getattr(smoke, kind), getattr(large, kind)
        for key in sorted(set(mine) | set(theirs)):
            if mine.get(key) != theirs.get(key):
                out.append(Difference(kind, key, mine.get(key), theirs.get(key)))
    if smoke.entrypoint != large.entrypoint:
        out.append(Difference("entrypoint", "entrypoint", smoke.entrypoint, large.entrypoint))
    return out
