"""The evidence a launch is judged against, read from storage with `rlaunch verify-smoke`'s code.

One reader for every caller of `rlaunch.judgement.judge`: the dry run and `--run` (through the
planned document) and the launch host (through the document it is given). The declared smoke's
verdict is verify-smoke's own (`collect` then `smoke_verdict` of its latest attempt), and its
document is the one that attempt ran, which parity compares with the launch.
"""

from __future__ import annotations

import os

from rlaunch import storage
from rlaunch.judgement.judge import Evidence, SmokeEvidence, credentials_present
from rlaunch.launch_config.gates import recorded_attempts
from rlaunch.launch_config.schema import DeclaredSmoke, SkyRLLaunchConfig
from rlaunch.observe.collect import collect, launch_document
from rlaunch.observe.resolve import at_path
from rlaunch.observe.verdict import smoke_verdict


def launch_evidence(document: SkyRLLaunchConfig) -> Evidence:
    """What storage holds now for launching `document` (its own attempt left out), and which of its
    declared credentials the environment it is submitted from sets."""
    smoke = document.gates.smoke
    return Evidence(
        attempts=tuple(recorded_attempts(document.artifacts.output_path, besides=document.run.attempt_id)),
        served=storage.exists(document.artifacts.terminal_manifest_uri),
        smoke=None if smoke is None else smoke_evidence(smoke),
        credentials=credentials_present(document.run.credentials, os.environ),
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
