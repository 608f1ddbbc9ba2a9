"""The versioned artifact graph: steps, identity, fingerprints, records and the runner.

Names load on first use (`rlaunch.lazy`): building a graph never imports the runner (threads,
locks, concurrent.futures), and `from rlaunch.artifacts import records` loads just that module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rlaunch.lazy import lazy_exports

if TYPE_CHECKING:  # pragma: no cover
    from rlaunch.artifacts.artifact import Artifact, ArtifactTypeMismatchError, Directory
    from rlaunch.artifacts.context import (
        FingerprintTimeError,
        StepContext,
        UndeclaredDependencyError,
        UndeclaredRuntimeArgError,
    )
    from rlaunch.artifacts.fingerprint import CanonicalizationError, canonical_json
    from rlaunch.artifacts.identity import InvalidIdentityError, validate_name, validate_version
    from rlaunch.artifacts.plan import PlannedStep, plan_graph
    from rlaunch.artifacts.runner import FingerprintDriftError, RunFailedError, Runner, StepOutcome
    from rlaunch.artifacts.step import ArtifactStep, FingerprintMismatchError, GraphError, graph_handles
    from rlaunch.artifacts.versions import (
        BuildContext,
        VersionCodex,
        build_context,
        current_build_context,
        resolve_version,
        variants,
    )
    from rlaunch.names import is_mutable

__all__ = [
    "Artifact",
    "ArtifactStep",
    "ArtifactTypeMismatchError",
    "BuildContext",
    "CanonicalizationError",
    "Directory",
    "FingerprintDriftError",
    "FingerprintMismatchError",
    "FingerprintTimeError",
    "GraphError",
    "InvalidIdentityError",
    "PlannedStep",
    "RunFailedError",
    "Runner",
    "StepContext",
    "StepOutcome",
    "UndeclaredDependencyError",
    "UndeclaredRuntimeArgError",
    "VersionCodex",
    "build_context",
    "canonical_json",
    "current_build_context",
    "graph_handles",
    "is_mutable",
    "plan_graph",
    "resolve_version",
    "validate_name",
    "validate_version",
    "variants",
]

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "artifact": ["Artifact", "ArtifactTypeMismatchError", "Directory"],
        "context": ["FingerprintTimeError", "StepContext", "UndeclaredDependencyError", "UndeclaredRuntimeArgError"],
        "fingerprint": ["CanonicalizationError", "canonical_json"],
        "identity": ["InvalidIdentityError", "is_mutable", "validate_name", "validate_version"],
        "plan": ["PlannedStep", "plan_graph"],
        "runner": ["FingerprintDriftError", "RunFailedError", "Runner", "StepOutcome"],
        "step": ["ArtifactStep", "FingerprintMismatchError", "GraphError", "graph_handles"],
        "versions": [
            "BuildContext",
            "VersionCodex",
            "build_context",
            "current_build_context",
            "resolve_version",
            "variants",
        ],
    },
)
