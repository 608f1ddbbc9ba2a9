"""Rendering a spec and an execution into the one `SkyRLLaunchConfig` document.

At fingerprint time placement is replaced by placeholders, so the document bears exactly the
run's identity: runtime and digest, allocation shape, recipe with the role plan rendered in,
input identities, retention and seed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import StepContext
from rlaunch.launch_config.schema import (
    SCHEMA_VERSION,
    Allocation,
    ArtifactsSection,
    ClusterSection,
    GatesSection,
    InputsSection,
    RunSection,
    RuntimeSection,
    from_dict,
)
from rlaunch.launch_config.task_env import task_environment
from rlaunch.launch_config.typed import encode
from rlaunch.names import sanitize_job_name
from rlaunch.runs.layout import RunPaths, temporary_root
from rlaunch.runs.resume import run_fingerprint
from rlaunch.skyrl.execution import SkyRLExecution
from rlaunch.skyrl.sources import artifact_identity
from rlaunch.skyrl.spec import SkyRLSpec

PLACEHOLDER = "<placement>"


def run_id(spec: SkyRLSpec) -> str:
    return f"{spec.name}-{spec.version}"


def live_run_paths(spec: SkyRLSpec, prefix: str) -> RunPaths:
    """Where a run's outputs live under `prefix` (durable path, TTL checkpoint and attempt roots)."""
    temp = temporary_root(prefix, spec.name, spec.version, spec.retention.temporary_storage_ttl_days)
    return RunPaths.derive(storage.join(prefix, spec.name, spec.version), temp)


def run_paths(spec: SkyRLSpec, ctx: StepContext) -> RunPaths:
    if ctx.is_fingerprint:
        return RunPaths.derive(ctx.output_path, "<temporary_output_path>")
    return live_run_paths(spec, ctx.prefix)


def spec_fingerprint(spec: SkyRLSpec) -> str:
    """The run fingerprint the host will stamp on this spec's rendered document, computed from the
    spec (no dependency needs to be built): the same identity view, produced from the same values."""
    topology = spec.topology
    view = {
        "skyrl": spec.rendered_recipe(),
        "run": {"seed": spec.seed},
        "runtime": {"profile": spec.runtime.profile, "entrypoint": spec.entrypoint},
        "cluster": {
            "allocation": {
                "num_nodes": topology.num_nodes,
                "gpus_per_node": topology.gpus_per_node,
                "gpu_variant": topology.gpu_variant,
            }
        },
        "inputs": {
            "model": {
                "identity": artifact_identity(spec.model.step),
                "tokenizer_revision": spec.model.tokenizer_revision,
            },
            "train_data": [
                {"identity": artifact_identity(s.step), "relative_path": s.relative_path} for s in spec.train_data
            ],
            "validation_data": [
                {"identity": artifact_identity(s.step), "relative_path": s.relative_path} for s in spec.validation_data
            ],
        },
    }
    return run_fingerprint(view)


def allocation(spec: SkyRLSpec, execution: SkyRLExecution) -> Allocation:
    """The physical gang: the topology's shape with the execution's per-node host resources."""
    topology = spec.topology
    return Allocation(
        num_nodes=topology.num_nodes,
        gpus_per_node=topology.gpus_per_node,
        gpu_variant=topology.gpu_variant,
        cpu=float(execution.cpu),
        memory=execution.memory,
        disk=execution.disk,
    )


def render_document(
    spec: SkyRLSpec,
    execution: SkyRLExecution | None,
    ctx: StepContext,
    *,
    attempt_id: str,
    export_hf: bool,
    gates: GatesSection | None = None,
) -> dict[str, Any]:
    """The launch document as plain data (validated against the schema when placement is real)."""
    paths = run_paths(spec, ctx)
    rid = run_id(spec)
    topology = spec.topology
    sections: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run": encode(
            RunSection(
                id=rid,
                attempt_id=attempt_id,
                seed=spec.seed,
                export_hf=export_hf,
                artifact=f"{spec.name}@{spec.version}",
            )
        ),
        "runtime": encode(
            RuntimeSection(
                profile=spec.runtime.profile,
                source_digest=spec.runtime.source_digest,
                entrypoint=spec.entrypoint,
                compatible_checkpoint_digests=spec.compatible_checkpoint_digests,
            )
        ),
    }
    if execution is None:
        sections["cluster"] = {
            "backend": PLACEHOLDER,
            "job_name": PLACEHOLDER,
            "allocation": {
                "num_nodes": topology.num_nodes,
                "gpus_per_node": topology.gpus_per_node,
                "gpu_variant": topology.gpu_variant,
                "cpu": PLACEHOLDER,
                "memory": PLACEHOLDER,
                "disk": PLACEHOLDER,
            },
            "placement": PLACEHOLDER,
        }
    else:
        profile = spec.runtime.runtime_profile
        sections["cluster"] = encode(
            ClusterSection(
                backend=execution.backend,  # type: ignore[arg-type]
                job_name=sanitize_job_name(f"{rid}-{attempt_id}"),
                allocation=allocation(spec, execution),
                placement=dict(execution.placement()),
                priority=execution.priority,
                max_retries=execution.max_retries,
                timeout_seconds=execution.job_timeout_seconds,
                wandb_entity=execution.wandb_entity,
                task_env=task_environment(
                    (profile.task_env, execution.task_env), (*profile.env_passthrough, *execution.env_passthrough)
                ),
            )
        )
    sections["artifacts"] = encode(
        ArtifactsSection(**dataclasses.asdict(paths), resume_checkpoint_count=spec.retention.resume_checkpoint_count)
    )
    sections["inputs"] = encode(
        InputsSection(
            model=spec.model.locator(ctx),
            train_data=tuple(s.locator(ctx) for s in spec.train_data),
            validation_data=tuple(s.locator(ctx) for s in spec.validation_data),
        )
    )
    sections["skyrl"] = spec.rendered_recipe()
    if execution is not None:
        sections["ray"] = encode(execution.ray)
        sections["gates"] = encode(gates or GatesSection(smoke_gate_nodes=execution.smoke_gate_nodes))
        from_dict(sections)  # a rendering bug fails here, naming the path, not in the host
    return sections
