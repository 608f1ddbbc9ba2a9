"""The evidence a launch is judged against, read from storage with `rlaunch verify-smoke`'s code.

One reader for every caller of `rlaunch.judgement.judge`: the dry run and `--run` (through the
planned document) and the launch host (through the document it is given). The declared smoke's
verdict is verify-smoke's own (`collect` then `smoke_verdict` of its latest attempt), and its
document is the one that attempt ran, which parity compares with the launch.
"""

from __future__ import annotations

import os

from rlaunch import storage
from rlaunch.judgement.gates import recorded_attempts
from rlaunch.judgement.judge import Evidence, SmokeEvidence, credentials_present, needed_credentials
from rlaunch.judgement.planned import PlannedLaunch
from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.recipe_keys import TRAINER
from rlaunch.launch_config.schema import DeclaredSmoke
from rlaunch.observe.collect import collect, launch_document
from rlaunch.observe.resolve import at_path
from rlaunch.observe.verdict import smoke_verdict
from rlaunch.runs.layout import latest_checkpoint
from rlaunch.runs.resume import resume_problem, run_fingerprint


def launch_evidence(planned: PlannedLaunch) -> Evidence:
    """What storage holds now for launching `planned` (its own attempt left out), which of the
    credentials it needs the environment it is submitted from sets, and whether the checkpoint it
    would resume may be resumed."""
    document = planned.document
    smoke = document.gates.smoke
    return Evidence(
        attempts=tuple(recorded_attempts(document.artifacts.output_path, besides=document.run.attempt_id)),
        served=storage.exists(document.artifacts.terminal_manifest_uri),
        smoke=None if smoke is None else smoke_evidence(smoke),
        credentials=credentials_present(needed_credentials(planned), os.environ),
        resume=resume_evidence(planned),
        storage=tuple(
            f"{problem} (outputs go to {document.artifacts.output_path})"
            for root in dict.fromkeys((document.artifacts.output_path, document.artifacts.attempts_root))
            if (problem := storage.writable_problem(root))
        ),
    )


def resume_evidence(planned: PlannedLaunch) -> str | None:
    """The resume gate's reading of storage: the latest checkpoint of the run's own root, and the pin."""
    document = planned.document
    runtime, pin = document.runtime, document.runtime.resume_from
    return resume_problem(
        latest_checkpoint(document.artifacts.checkpoint_root),
        digest=runtime.source_digest,
        fingerprint=run_fingerprint(document.to_dict()),
        compatible=runtime.compatible_checkpoint_digests,
        pin=None if pin is None else (pin.checkpoint_root, pin.step, pin.runtime_digest),
        resume_mode=get_path(planned.composed, TRAINER.RESUME_MODE),
    )


def smoke_evidence(smoke: DeclaredSmoke) -> SmokeEvidence:
    """The declared smoke's attempts and, once it ran, verify-smoke's verdict and its document."""
    attempts = tuple(recorded_attempts(smoke.output_path))
    if not attempts:
        return SmokeEvidence(smoke.identity)
    ref = at_path(smoke.output_path)
    verdict = smoke_verdict(collect(ref, smoke.identity))
    latest = ref.attempt() or {}
    document, _ = launch_document(latest, smoke.output_path)
    return SmokeEvidence(
        smoke.identity,
        attempts,
        document,
        tuple(f"{c.name}: {c.evidence}" for c in verdict.failed),
    )
