"""The launch gates on the experiment side: what the plan says of them.

The decision is `rlaunch.judgement.judge` (the host and `--run` apply it). Here the rules read the launch
document a step would launch (`planning.planned_document`) and its stored facts (`stored_facts`:
the run record's attempts, the terminal manifest, the declared smoke's attempts), never the spec.
The document's `gates` section is rendered with the document (`launch_document.gates_section`).
"""

from __future__ import annotations

from rlaunch.judgement.gates import (
    declared_compatible,
    foreign_digests,
    retry_needed,
    smoke_problem,
    smoke_record_problem,
    version_problem,
)
from rlaunch.judgement.judge import large
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.skyrl.plan.stored_facts import StoredFacts


def old_runtime_note(document: SkyRLLaunchConfig, facts: StoredFacts) -> str | None:
    """For a served version whose runtime changed since: where its stored result came from."""
    digest = document.runtime.source_digest
    old = foreign_digests(facts.attempts, digest)
    if not facts.served or not old:
        return None
    return (
        f"served from storage: the stored result came from the old runtime (source digest "
        f"{', '.join(d[:16] for d in old)}), not this one ({digest[:16]}); to train on this runtime, launch a new version"
    )


def plan_rows(document: SkyRLLaunchConfig, facts: StoredFacts) -> list[tuple[str, str]]:
    """The plan's `version` and `retry` rows: what the gates would say of `--run` now."""
    digest, compatible = document.runtime.source_digest, document.runtime.compatible_checkpoint_digests
    pin = document.runtime.resume_from
    refused = version_problem(facts.attempts, digest, compatible, pinned=pin is not None)
    declared = declared_compatible(facts.attempts, digest, compatible)
    served_old = old_runtime_note(document, facts)
    old = [d for d in foreign_digests(facts.attempts, digest) if d not in declared]
    if served_old:
        version = served_old
    elif pin is not None and old:
        version = (
            f"reused across a repin: earlier attempts ran under runtime digest {', '.join(d[:16] for d in old)}, "
            f"this runtime {digest[:16]} starts from the pinned checkpoint at a fresh checkpoint root "
            f"({document.artifacts.checkpoint_root})"
        )
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
    retry = (  # whether --retry was given is the judgement's to say (`judge`, printed below the plan)
        f"a retry: the latest attempt {latest.get('attempt_id')} {latest.get('state')} (the judgement below says "
        "whether --run may relaunch it)"
        if latest is not None and not facts.served
        else "not a retry"
    )
    return [("version", version), ("retry", retry)]


def smoke_line(planned: PlannedLaunch, facts: StoredFacts) -> str:
    """The smoke gate's requirement for this launch and, when a smoke is declared, whether it has run."""
    document = planned.document
    smoke = document.gates.smoke
    if smoke is None:
        why = large(planned)
        if why is None:
            return "smoke gate: none declared; not required (a small launch)"
        return f"smoke gate: REQUIRED, none declared: {smoke_problem(why)}"
    waiting = smoke_record_problem(facts.smoke_attempts or (), smoke.identity, document.runtime.source_digest)
    return f"waiting: {waiting}" if waiting else "its stored run succeeded (--run also checks its verify-smoke verdict)"
