"""`skyrl_step`: an RL run as one artifact step whose config is the rendered launch document."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rlaunch import storage
from rlaunch.artifacts import Artifact, ArtifactStep, StepContext, records
from rlaunch.experiment_code import ExperimentCode, publish
from rlaunch.judgement.gates import authorisations
from rlaunch.launch_config import schema
from rlaunch.launch_config.failures import classify
from rlaunch.launch_config.schema import WAIVABLE
from rlaunch.runs.layout import HANDED_DOCUMENT, attempt_dir
from rlaunch.runs.run_record import keep_field, marked, update_attempt
from rlaunch.runs.sweep import RECORD_KEY
from rlaunch.secrets import refuse_secrets_in
from rlaunch.skyrl.plan import launcher, planning
from rlaunch.skyrl.plan.launch_document import gates_section, render_document
from rlaunch.skyrl.values.execution import SkyRLExecution
from rlaunch.skyrl.values.spec import SkyRLSpec

EXECUTION_ARG = "skyrl_execution"


@dataclass(frozen=True)
class SkyRLRun(Artifact):
    """What an RL step records: where the run's outputs are and which jobs produced them."""

    state: str = "succeeded"
    hf_model_uri: str | None = None
    global_step: int | None = None
    checkpoint_root: str = ""
    terminal_manifest_uri: str = ""
    attempt_id: str = ""
    coordinator_job_id: str | None = None
    child_job_id: str | None = None
    backend: str = ""
    runtime_profile: str = ""
    runtime_digest: str = ""
    topology: dict[str, Any] = field(default_factory=dict)
    tokenizer_revision: str = ""


@dataclass(frozen=True, eq=False, kw_only=True)
class SkyRLArtifactStep(ArtifactStep[SkyRLRun]):
    """An RL step: an ArtifactStep that also keeps its spec and execution (what planning renders:
    `planning.plan`, whose value the plan's views, the gates and the submission checks read)."""

    spec: SkyRLSpec
    execution: SkyRLExecution
    execution_type: ClassVar[type] = SkyRLExecution
    export_hf: bool | None = None  # None: left to the default, no terminal export
    smoke: SkyRLArtifactStep | None = None
    is_smoke: bool = False
    waivers: Mapping[str, str] = field(default_factory=dict)  # gate -> why it is let go (`skyrl_step`)
    submitted_by: ClassVar[str | None] = "@rl_build_options"  # its coordinator alone launches it

    def __repr__(self) -> str:
        return f"SkyRLArtifactStep({self.identity})"


def skyrl_step(
    spec: SkyRLSpec,
    execution: SkyRLExecution,
    export_hf: bool | None = None,
    *,
    smoke: SkyRLArtifactStep | None = None,
    is_smoke: bool = False,
    waivers: Mapping[str, str] | None = None,
) -> SkyRLArtifactStep:
    """An RL step. `smoke` names the smoke that rehearses it: `--run` is then refused unless that
    smoke's verify-smoke verdict is PASS and parity holds (`--skip-smoke-gate REASON` overrides).
    The smoke is a gate, not a dependency: it is neither built by this step nor part of its identity.
    `is_smoke` declares this step a smoke (the small rehearsal of a large run): it is never large;
    one the default thresholds would call large says why in `waivers={"large": "<reason>"}` (a waiver
    kept in the run record, like `--waive large=REASON`; `rlaunch.judgement.judge`).
    `export_hf` left out means no terminal export, shown as a default in the plan's readiness."""
    if not isinstance(spec, SkyRLSpec):
        raise TypeError(f"skyrl_step needs a SkyRLSpec, got {spec!r}")
    if not isinstance(execution, SkyRLExecution):
        raise TypeError(
            f"skyrl_step needs an execution (LocalSkyRLExecution, RaySkyRLExecution, IrisSkyRLExecution, SlurmSkyRLExecution), got {execution!r}"
        )
    if smoke is not None and not isinstance(smoke, SkyRLArtifactStep):
        raise TypeError(f"skyrl_step(smoke=...) must be another skyrl_step, got {smoke!r}")
    declared_waivers = dict(waivers or {})
    unknown = sorted(set(declared_waivers) - set(WAIVABLE))
    if unknown or not all(str(r).strip() for r in declared_waivers.values()):
        raise ValueError(
            f"{spec.name}@{spec.version}: skyrl_step(waivers=...) takes gate -> reason for the gates "
            f"{', '.join(WAIVABLE)}, each with a reason; got {declared_waivers!r}"
        )
    if smoke is not None and is_smoke:
        raise ValueError(
            f"{spec.name}@{spec.version}: a smoke (is_smoke=True) rehearses a launch; it declares no smoke"
        )
    spec = in_variant(spec, is_smoke)

    def build_config(ctx: StepContext) -> dict[str, Any]:
        placement: SkyRLExecution | None = None
        attempt = "<attempt_id>"
        facts = None
        gates = None
        if not ctx.is_fingerprint:  # the inputs are built now: what they recorded is read and checked
            placed: SkyRLExecution = ctx.runtime_arg(EXECUTION_ARG)
            placement = placed
            attempt = uuid.uuid4().hex[:12]
            facts = planning.stored_facts(spec, ctx.prefix)
            planning.check(spec, placed, facts)
            gates = gates_section(smoke, placed, ctx.prefix, is_smoke=is_smoke, waivers=declared_waivers)
        document = render_document(
            spec,
            placement,
            ctx,
            attempt_id=attempt,
            export_hf=export_hf,
            gates=gates,
            model=None if facts is None else facts.model,
        )
        refuse_secrets_in(document, f"the launch document of {spec.name}@{spec.version}")
        return {
            "artifact": {"name": spec.name, "version": spec.version},
            "topology": spec.topology.as_dict(),
            "launch_document": document,
        }

    return SkyRLArtifactStep(
        name=spec.name,
        version=spec.version,
        artifact_type=SkyRLRun,
        run=run_skyrl,
        build_config=build_config,
        deps=spec.deps(),
        runtime_args={EXECUTION_ARG: execution},
        spec=spec,
        execution=execution,
        export_hf=export_hf,
        smoke=smoke,
        is_smoke=is_smoke,
        waivers=declared_waivers,
    )


def in_variant(spec: SkyRLSpec, is_smoke: bool) -> SkyRLSpec:
    """`spec` as the active sweep variant's step (unchanged outside a sweep). A launch takes the
    variant's settings and its label (its own name, so its own paths and records) and says which
    sweep it belongs to. A smoke takes the variant's settings only when they change what parity
    compares (a generation length, not a learning rate): otherwise it is the smoke as declared, the
    same for every variant, shared; else it is that variant's own (it carries no membership: it is
    no variant of the sweep, it rehearses one)."""
    import dataclasses

    from rlaunch.artifacts.versions import current_build_context
    from rlaunch.judgement.parity import recipe_differences
    from rlaunch.skyrl.values.overrides import RecipeOverride

    ctx = current_build_context()
    variant = None if ctx is None else ctx.variant
    if ctx is None or variant is None:
        return spec
    if ctx.in_code:  # a choice declared in Python changes the spec itself: every RL step is the variant's
        return dataclasses.replace(spec, name=ctx.variant_name(spec.name), sweep=None if is_smoke else variant)
    swept = {RecipeOverride(k, v) for k, v in variant.settings.items()}
    if is_smoke:
        unswept = dataclasses.replace(spec, recipe_overrides=tuple(o for o in spec.recipe_overrides if o not in swept))
        compared = recipe_differences(spec.runtime.profile, unswept.rendered_recipe(), spec.rendered_recipe())
        spec = spec if compared else unswept
    own = any(o in swept for o in spec.recipe_overrides) or any(ctx.is_variants(d.name) for d in spec.deps())
    if not own:
        return spec
    return dataclasses.replace(spec, name=ctx.variant_name(spec.name), sweep=None if is_smoke else variant)


def run_skyrl(config: dict[str, Any]) -> SkyRLRun:
    """Record the request, write the launch document beside the attempt and hand it to the host."""
    from rlaunch.cluster.protocol import JOB_ID_ENV  # the coordinator job this runs in, named from the first write

    document = schema.from_dict(config["launch_document"])
    art, run = document.artifacts, document.run
    if document.code is not None:  # the files fingerprinted, stored by their digest before a task stages them
        code = document.code
        publish(ExperimentCode(code.modules), code.uri, code.digest)
    url = storage.join(attempt_dir(art.attempts_root, run.attempt_id), HANDED_DOCUMENT)
    storage.write_text_atomic(url, schema.dumps(document))
    status = records.read_status(art.output_path) or {}
    update_attempt(art.output_path, run.id, run.attempt_id, {
        "state": "launching",
        "artifact": f"{config['artifact']['name']}@{config['artifact']['version']}",
        "fingerprint": status.get("fingerprint"),
        "backend": document.cluster.backend,
        "placement": dict(document.cluster.placement),
        "runtime_profile": document.runtime.profile,
        "runtime_digest": document.runtime.source_digest,
        "topology": config["topology"],
        "argv": records.redact_argv(list(sys.argv)),
        "launch_document_uri": url,
        "submitted_at": storage.utc_now(),
        **({"coordinator_job_id": os.environ[JOB_ID_ENV]} if os.environ.get(JOB_ID_ENV) else {}),
        **authorisations(document.gates),
        "phases": marked(),
    })  # fmt: skip
    if run.sweep is not None:  # grouped with its sweep from its first attempt on (the host writes it too)
        keep_field(art.output_path, run.id, RECORD_KEY, dict(run.sweep))
    try:
        result = launcher.launch(url)
    except launcher.LaunchFailedError as exc:
        failed: dict[str, Any] = {"state": "failed", "failure": str(exc)}
        if exc.host_exit_code is not None:  # the host died without classifying the attempt: its end says how
            failed["failure_class"] = classify(str(exc), exit_codes=[exc.host_exit_code]).to_json()
        update_attempt(art.output_path, run.id, run.attempt_id, failed)
        raise
    model = result.get("model") or {}
    return SkyRLRun(
        path=document.artifacts.output_path,
        state=result["state"],
        hf_model_uri=model.get("policy_export_uri"),
        global_step=model.get("global_step", result.get("global_step")),
        checkpoint_root=document.artifacts.checkpoint_root,
        terminal_manifest_uri=document.artifacts.terminal_manifest_uri,
        attempt_id=document.run.attempt_id,
        coordinator_job_id=result.get("coordinator_job_id"),
        child_job_id=result.get("child_job_id"),
        backend=document.cluster.backend,
        runtime_profile=document.runtime.profile,
        runtime_digest=document.runtime.source_digest,
        topology=config["topology"],
        tokenizer_revision=document.inputs.model.tokenizer_revision,
    )
