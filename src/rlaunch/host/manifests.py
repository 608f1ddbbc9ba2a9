"""The launch result and the manifests written from it.

Every terminal attempt writes `{attempts_root}/{attempt_id}.json`; a success also writes the
terminal manifest, exactly once (an existing terminal manifest is never replaced). A rehearsal
that reached its expected end is `rehearsed`: not a failure, and no terminal manifest.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from rlaunch import storage
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.runs.layout import attempt_manifest
from rlaunch.runs.rehearsal_report import REHEARSED
from rlaunch.secrets import scrub_tree
from rlaunch.storage import utc_now

PREPARED, SUBMITTED, SUCCEEDED, FAILED = "prepared", "submitted", "succeeded", "failed"


@dataclass
class LaunchResult:
    run_id: str
    attempt_id: str
    state: str
    backend: str
    runtime_profile: str
    runtime_digest: str
    coordinator_job_id: str | None = None
    child_job_id: str | None = None
    child_job_state: str | None = None
    model: dict[str, Any] | None = None
    failure: str | None = None
    violations: list[dict[str, Any]] = dataclasses.field(default_factory=list)  # a refused document's rule violations
    resolved_config_uri: str | None = None
    started_at: str = dataclasses.field(default_factory=utc_now)
    finished_at: str | None = None
    rehearsal: dict[str, Any] | None = None  # the rehearsal report (state rehearsed)
    failure_class: dict[str, Any] | None = None  # deterministic or operational (launch_config.failures)
    resume: dict[str, Any] | None = None  # the verified checkpoint resumed, and the damaged ones skipped

    @property
    def ok(self) -> bool:
        return self.state in (PREPARED, SUBMITTED, SUCCEEDED, REHEARSED)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def write_manifests(doc: SkyRLLaunchConfig, resolved: dict[str, Any], result: LaunchResult) -> None:
    payload = scrub_tree({"config": resolved, "result": result.to_json()})
    storage.write_json_atomic(attempt_manifest(doc.artifacts.attempts_root, doc.run.attempt_id), payload)
    if result.state == SUCCEEDED and not storage.create_exclusive(
        doc.artifacts.terminal_manifest_uri, storage.dumps(payload)
    ):
        raise FileExistsError(
            f"terminal manifest {doc.artifacts.terminal_manifest_uri} already exists and is immutable"
        )
