"""The launch gates on the experiment side: what the plan says of them, what `--run` refuses.

The rules are `rlaunch.launch_config.gates` (the host applies them too); this module gathers the
stored facts an RL step's gates read (its run record's attempts, the declared smoke's record, the
terminal manifest) and renders the document's `gates` section: the declared smoke, the smoke
gate's threshold, and the operator's authorisations. Those come to the coordinator from the
submitting process in `$RLAUNCH_AUTHORISED` (reason, who, when, set once at submission).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from rlaunch import storage
from rlaunch.launch_config.gates import (
    declared_compatible,
    foreign_digests,
    large_launch,
    recorded_attempts,
    retry_needed,
    retry_problem,
    smoke_problem,
    smoke_record_problem,
    version_problem,
)
from rlaunch.launch_config.schema import Authorisation, DeclaredSmoke, GatesSection
from rlaunch.launch_config.typed import decode
from rlaunch.skyrl.execution import SkyRLExecution
from rlaunch.skyrl.launch_document import live_run_paths
from rlaunch.skyrl.spec import SkyRLSpec

AUTHORISED_ENV = "RLAUNCH_AUTHORISED"
GATE_OPTIONS = {"retry": "--retry", "skip_smoke_gate": "--skip-smoke-gate"}


@dataclass(frozen=True)
class StoredFacts:
    """What an RL version's gates read from storage (one place, so it can move with the run record)."""

    attempts: list[dict[str, Any]]
    served: bool  # its terminal manifest exists: --run serves it, nothing is launched

    @classmethod
    def read(cls, spec: SkyRLSpec, prefix: str) -> StoredFacts:
        paths = live_run_paths(spec, prefix)
        return cls(recorded_attempts(paths.output_path), storage.exists(paths.terminal_manifest_uri))


def authorised() -> dict[str, Authorisation]:
    """The authorisations this coordinator was submitted with (none outside a coordinator)."""
    raw = json.loads(os.environ.get(AUTHORISED_ENV) or "{}")
    return {name: decode(Authorisation, value, what=GATE_OPTIONS[name]) for name, value in raw.items()}


def gates_section(smoke: Any, execution: SkyRLExecution, prefix: str) -> GatesSection:
    """The document's `gates`: the declared smoke, the threshold, the authorisations given."""
    declared = None
    if smoke is not None:
        declared = DeclaredSmoke(smoke.identity, live_run_paths(smoke.spec, prefix).output_path)
    given = authorised()
    return GatesSection(
        smoke=declared,
        smoke_gate_nodes=execution.smoke_gate_nodes,
        retry=given.get("retry"),
        skip_smoke_gate=given.get("skip_smoke_gate"),
    )


def large(spec: SkyRLSpec, execution: SkyRLExecution) -> str | None:
    profile = spec.runtime.runtime_profile
    return large_launch(
        profile.capabilities.accelerator,
        spec.topology.num_nodes,
        execution.smoke_gate_nodes,
        rehearsal=profile.rehearsal,
    )


def launch_problems(spec: SkyRLSpec, prefix: str, *, retry_given: bool) -> list[str]:
    """Why `--run` may not launch this RL version: the version and retry gates (the smoke gate is
    `rlaunch.cli.smoke_gate`'s, with the smoke's verdict and parity)."""
    facts = StoredFacts.read(spec, prefix)
    gates = GatesSection(retry=Authorisation("given on the command line") if retry_given else None)
    found = [
        version_problem(facts.attempts, spec.runtime.source_digest, spec.compatible_checkpoint_digests),
        retry_problem(facts.attempts, gates),
    ]
    return [p for p in found if p]


def undeclared_smoke(spec: SkyRLSpec, execution: SkyRLExecution) -> str | None:
    """Why a launch that declares no smoke is refused (None: it is small)."""
    return smoke_problem(large(spec, execution), GatesSection())


def old_runtime_note(spec: SkyRLSpec, facts: StoredFacts) -> str | None:
    """For a served version whose runtime changed since: where its stored result came from."""
    digest = spec.runtime.source_digest
    old = foreign_digests(facts.attempts, digest)
    if not facts.served or not old:
        return None
    return (
        f"served from storage: the stored result came from the old runtime (source digest "
        f"{', '.join(d[:16] for d in old)}), not this one ({digest[:16]}); to train on this runtime, launch a new version"
    )


def plan_rows(spec: SkyRLSpec, prefix: str) -> list[tuple[str, str]]:
    """The plan's `version` and `retry` rows: what the gates would say of `--run` now."""
    facts = StoredFacts.read(spec, prefix)
    digest, compatible = spec.runtime.source_digest, spec.compatible_checkpoint_digests
    refused = version_problem(facts.attempts, digest, compatible)
    declared = declared_compatible(facts.attempts, digest, compatible)
    served_old = old_runtime_note(spec, facts)
    if served_old:
        version = served_old
    elif refused:
        version = f"REFUSED: {refused}"
    elif declared:
        version = (
            f"compatible by declaration: earlier attempts ran under runtime digest "
            f"{', '.join(d[:16] for d in declared)}, this runtime is {digest[:16]}"
        )
    else:
        version = f"{len(facts.attempts)} recorded attempt(s), all under this runtime" if facts.attempts else "new"
    latest = retry_needed(facts.attempts)
    retry = (
        f'--run needs --retry "<reason>": the latest attempt {latest.get("attempt_id")} {latest.get("state")}'
        if latest is not None and not facts.served
        else "not a retry"
    )
    return [("version", version), ("retry", retry)]


def smoke_line(spec: SkyRLSpec, execution: SkyRLExecution, smoke: Any, prefix: str) -> str:
    """The smoke gate's requirement for this launch and, when a smoke is declared, whether it has run."""
    why = large(spec, execution)
    if smoke is None:
        if why is None:
            return "smoke gate: none declared; not required (a small launch)"
        return f"smoke gate: REQUIRED, none declared: {undeclared_smoke(spec, execution)}"
    waiting = smoke_record_problem(
        recorded_attempts(live_run_paths(smoke.spec, prefix).output_path), smoke.identity, spec.runtime.source_digest
    )
    return f"waiting: {waiting}" if waiting else "its stored run succeeded (--run also checks its verify-smoke verdict)"
