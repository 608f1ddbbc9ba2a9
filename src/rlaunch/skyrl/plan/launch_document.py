"""Rendering a spec and an execution into the one `SkyRLLaunchConfig` document.

At fingerprint time placement is replaced by placeholders, so the document bears exactly the
run's identity: runtime and digest, allocation shape, recipe with the role plan rendered in,
input identities and the graph behind them, retention and seed. Once placement is real the
document carries everything its readers need (the host, and the plan's views: the plan view,
readiness, parity, the resume check), so none of them goes back to the spec. Its `gates` section
carries the declared smoke, the smoke gate's threshold and the operator's authorisations, which
come to the coordinator from the submitting process in `$RLAUNCH_AUTHORISED` (reason, who, when,
set once at submission).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rlaunch import storage
from rlaunch.artifacts import StepContext
from rlaunch.experiment_code import ExperimentCodeError, code_uri
from rlaunch.judgement.gates import AUTHORISED_ENV, GATE_OPTIONS
from rlaunch.launch_config.schema import (
    SCHEMA_VERSION,
    Allocation,
    ArtifactsSection,
    Authorisation,
    ClusterSection,
    CodeSection,
    CoordinatorSection,
    DeclaredSmoke,
    GatesSection,
    InputsSection,
    RunSection,
    RuntimeSection,
    from_dict,
)
from rlaunch.launch_config.task_env import task_environment
from rlaunch.launch_config.typed import decode, encode
from rlaunch.names import sanitize_job_name
from rlaunch.runs.layout import RunPaths, temporary_root
from rlaunch.runs.resume import pinned_checkpoint_root
from rlaunch.skyrl.values.execution import SkyRLExecution
from rlaunch.skyrl.values.spec import SkyRLSpec
from rlaunch.sources.inputs import graph_shape
from rlaunch.sources.model_facts import StoredModel

if TYPE_CHECKING:
    from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep  # it plans through this module

PLACEHOLDER = "<placement>"


def run_id(spec: SkyRLSpec) -> str:
    return f"{spec.name}-{spec.version}"


def live_run_paths(spec: SkyRLSpec, prefix: str) -> RunPaths:
    """Where a run's outputs live under `prefix` (durable path, TTL checkpoint and attempt roots);
    a run that starts from a pinned checkpoint keeps its own under a root of its runtime."""
    temp = temporary_root(prefix, spec.name, spec.version, spec.retention.temporary_storage_ttl_days)
    paths = RunPaths.derive(storage.join(prefix, spec.name, spec.version), temp)
    if spec.resume_from is None:
        return paths
    return dataclasses.replace(
        paths, checkpoint_root=pinned_checkpoint_root(paths.checkpoint_root, spec.runtime.source_digest)
    )


def run_paths(spec: SkyRLSpec, ctx: StepContext) -> RunPaths:
    if ctx.is_fingerprint:
        return RunPaths.derive(ctx.output_path, "<temporary_output_path>")
    return live_run_paths(spec, ctx.prefix)


def authorised() -> tuple[dict[str, Authorisation], dict[str, Authorisation]]:
    """The authorisations this coordinator was submitted with (none outside a coordinator): the
    gate options (`--retry`, `--skip-smoke-gate`) and the waivers (`--waive GATE=REASON`)."""
    raw = json.loads(os.environ.get(AUTHORISED_ENV) or "{}")
    waivers = raw.pop("waivers", {})
    given = {name: decode(Authorisation, value, what=GATE_OPTIONS[name]) for name, value in raw.items()}
    return given, {gate: decode(Authorisation, value, what=f"--waive {gate}") for gate, value in waivers.items()}


def gates_section(
    smoke: SkyRLArtifactStep | None,
    execution: SkyRLExecution,
    prefix: str,
    *,
    is_smoke: bool = False,
    waivers: Mapping[str, str] | None = None,
) -> GatesSection:
    """The document's `gates`: the declared smoke, whether this run is one, the thresholds, the
    authorisations given, and the waivers: those the step declares in code (`skyrl_step(waivers=...)`)
    and those given at submission (`--waive`, which win)."""
    declared = None
    if smoke is not None:
        shape = smoke.spec.topology
        declared = DeclaredSmoke(
            smoke.identity,
            live_run_paths(smoke.spec, prefix).output_path,
            num_nodes=shape.num_nodes,
            gpus=shape.num_nodes * shape.gpus_per_node,
        )
    given, submitted = authorised()
    in_code = {
        gate: Authorisation(reason, {"declared": "skyrl_step(waivers=...)"}) for gate, reason in (waivers or {}).items()
    }
    return GatesSection(
        smoke=declared,
        smoke_gate_nodes=execution.smoke_gate_nodes,
        smoke_gate_gpus=execution.smoke_gate_gpus,
        is_smoke=is_smoke,
        retry=given.get("retry"),
        skip_smoke_gate=given.get("skip_smoke_gate"),
        waivers={**in_code, **submitted},
    )


def code_section(spec: SkyRLSpec, prefix: str) -> CodeSection:
    """The shipped code's section: its bundle under `prefix` by digest (the files are found and
    hashed here, so a module that is missing or outside the working tree is refused in the dry run)."""
    code = spec.code
    assert code is not None
    if spec.reward is not None and (problem := code.function_problem(spec.reward, "SkyRLSpec.reward")):
        raise ExperimentCodeError(problem)
    return CodeSection(uri=code_uri(prefix, code.digest), digest=code.digest, modules=code.modules, reward=spec.reward)


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
    export_hf: bool | None,
    gates: GatesSection | None = None,
    model: StoredModel | None = None,
) -> dict[str, Any]:
    """The launch document as plain data (validated against the schema when placement is real);
    `model` is what storage holds of the model (`stored_facts`), for its facts in `inputs.model`;
    `export_hf` None is the default (no terminal export), which the document marks as one."""
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
                export_hf=bool(export_hf),
                artifact=f"{spec.name}@{spec.version}",
                export_hf_default=export_hf is None,
                credentials=spec.credentials,
                recipe_overrides={o.key: o.value for o in spec.recipe_overrides},
                sweep=None if spec.sweep is None else spec.sweep.to_dict(),
            )
        ),
        "runtime": encode(
            RuntimeSection(
                profile=spec.runtime.profile,
                source_digest=spec.runtime.source_digest,
                entrypoint=spec.entrypoint,
                compatible_checkpoint_digests=spec.compatible_checkpoint_digests,
                resume_from=spec.resume_from,
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
                coordinator=CoordinatorSection(
                    cpu=float(execution.coordinator_cpu),
                    memory=execution.coordinator_memory,
                    disk=execution.coordinator_disk,
                    timeout_hours=float(execution.coordinator_timeout_hours),
                ),
                execution=type(execution).__name__,
                defaults=execution.defaults(),
            )
        )
    sections["artifacts"] = encode(
        ArtifactsSection(
            **dataclasses.asdict(paths),
            resume_checkpoint_count=spec.retention.resume_checkpoint_count,
            temporary_storage_ttl_days=spec.retention.temporary_storage_ttl_days,
        )
    )
    sections["inputs"] = encode(
        InputsSection(
            model=spec.model.locator(ctx, model),
            train_data=tuple(s.locator(ctx) for s in spec.train_data),
            validation_data=tuple(s.locator(ctx) for s in spec.validation_data),
            graph=tuple(sorted(graph_shape(step) for step in spec.deps())),
        )
    )
    sections["skyrl"] = spec.rendered_recipe()
    if spec.code is not None:  # only when declared: a run without it keeps the fingerprint it had
        sections["code"] = encode(code_section(spec, ctx.prefix))
    if ctx.is_fingerprint:
        _drop_derived(sections)
    if execution is not None:
        sections["ray"] = encode(execution.ray)
        sections["gates"] = encode(gates or GatesSection(smoke_gate_nodes=execution.smoke_gate_nodes))
        if ctx.is_fingerprint:  # the size thresholds and the smoke mark are policy, not identity
            for name in ("smoke_gate_gpus", "is_smoke"):
                del sections["gates"][name]
        from_dict(sections)  # a rendering bug fails here, naming the path, not in the host
    return sections


def _drop_derived(sections: dict[str, Any]) -> None:
    """Leave out of the fingerprint what identity already decides: the TTL (like the temporary root
    it names, retention), and the inputs' artifact types and graph (their identities carry them);
    and whether export_hf was stated (its value is in); and the declared credentials (what the run
    needs from where it runs, not what it computes); and the recipe overrides' provenance (their
    values are in `skyrl`: a value set from the shell is the same run as one written in config_yaml);
    and the sweep it belongs to (a variant trains what the same `--set` trains, in whichever grid)."""
    del sections["run"]["credentials"]
    del sections["run"]["recipe_overrides"]
    del sections["run"]["sweep"]
    del sections["artifacts"]["temporary_storage_ttl_days"]
    del sections["run"]["export_hf_default"]
    inputs = sections["inputs"]
    del inputs["graph"]
    for source in (inputs["model"], *inputs["train_data"], *inputs["validation_data"]):
        del source["artifact_type"]
