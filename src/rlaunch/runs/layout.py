"""Where a run's files live: the one layout the trainer writes and every reader relies on.

Durable (under the RL artifact path): exports, the resolved launch document, the terminal
manifest and the run record. Temporary (under a TTL root derived from name and version):
checkpoints and attempts (per-attempt manifests, launch documents, trainer records).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from rlaunch import storage
from rlaunch.statefiles import parse_step_marker

TEMP_PREFIX_ENV = "RLAUNCH_TEMP_PREFIX"
LATEST_MARKER = "latest"
SKYRL_LATEST_MARKER = "latest_ckpt_global_step.txt"
RUNTIME_FILE = "rlaunch_runtime.json"
CHECKPOINT_META = "rlaunch_checkpoint.json"
METRICS = "metrics.jsonl"
MODEL_LOAD = "model_load.json"
WANDB_RUN = "wandb.json"  # the W&B run the trainer logged to, as the runtime's evidence reports it
JOINED = "joined"
GANG_OUTCOME = "gang/outcome.json"  # rank 0's verdict, which the other ranks leave with
GANG_STOPPED = "gang/stopped.json"  # rank 0's runtime stopped from outside (a cancel): its times, no verdict
RUN_RECORD = "run_record.json"
TERMINAL_MANIFEST = "terminal.json"
EXPORTS = "exports"
RESOLVED_DOCUMENT = "resolved-launch.yaml"
HANDED_DOCUMENT = "launch.yaml"  # the document the RL step hands the host, in the attempt's directory
CANCELLATIONS = "cancellations"
STEP_JOB_DOCUMENT = "step-job.json"  # what a step job runs: function, config, inputs (its attempt's directory)
STEP_JOB_RESULT = "step-result.json"  # the artifact's value fields the step job's function returned
EVALUATION_REPORT = (
    "report.json"  # an evaluation step's accuracy, interval, sampling and identities (rlaunch.evaluation)
)
STEP_JOB_TTL_DAYS = 7  # how long a step job's attempt directories are kept
_STEP_DIR = re.compile(r"^global_step_(\d+)$")


def temporary_base(prefix: str) -> str:
    """`$RLAUNCH_TEMP_PREFIX`, else `{prefix}/.tmp`: where checkpoints and attempts live."""
    return os.environ.get(TEMP_PREFIX_ENV) or storage.join(prefix, ".tmp")


def temporary_root(prefix: str, name: str, version: str, ttl_days: int) -> str:
    """`{temp prefix}/ttl={N}d/{name}/{version}`; the temp prefix defaults to `{prefix}/.tmp`."""
    return storage.join(temporary_base(prefix), f"ttl={ttl_days}d", name, version)


def step_job_attempts_root(prefix: str, name: str, version: str) -> str:
    """Where a step job's attempts live: beside the RL runs' temporary roots, never in the artifact."""
    return storage.join(temporary_root(prefix, name, version, STEP_JOB_TTL_DAYS), "attempts")


@dataclass(frozen=True)
class RunPaths:
    output_path: str
    checkpoint_root: str
    export_root: str
    attempts_root: str
    resolved_config_uri: str
    terminal_manifest_uri: str

    @classmethod
    def derive(cls, output_path: str, temp_root: str) -> RunPaths:
        return cls(
            output_path=output_path,
            checkpoint_root=storage.join(temp_root, "checkpoints"),
            export_root=export_root(output_path),
            attempts_root=storage.join(temp_root, "attempts"),
            resolved_config_uri=storage.join(output_path, RESOLVED_DOCUMENT),
            terminal_manifest_uri=terminal_manifest(output_path),
        )


def terminal_manifest(output_path: str) -> str:
    """`{output_path}/terminal.json`: the run's immutable outcome."""
    return storage.join(output_path, TERMINAL_MANIFEST)


def export_root(output_path: str) -> str:
    return storage.join(output_path, EXPORTS)


def cancel_record(output_path: str, attempt_id: str) -> str:
    """`{output_path}/cancellations/{attempt_id}.json`: who cancelled an attempt, when and why."""
    return storage.join(output_path, CANCELLATIONS, f"{attempt_id}.json")


def attempt_dir(attempts_root: str, attempt_id: str) -> str:
    return storage.join(attempts_root, attempt_id)


def attempt_manifest(attempts_root: str, attempt_id: str) -> str:
    return storage.join(attempts_root, f"{attempt_id}.json")


def checkpoint_dir(checkpoint_root: str, step: int) -> str:
    return storage.join(checkpoint_root, f"global_step_{step}")


def export_policy_dir(export_root: str, step: int) -> str:
    return storage.join(export_root, f"global_step_{step}", "policy")


def run_record(output_path: str) -> str:
    return storage.join(output_path, RUN_RECORD)


@dataclass(frozen=True)
class CheckpointInfo:
    step: int
    path: str
    runtime_digest: str | None
    fingerprint: str | None = None  # the run fingerprint it was written under (launch_config.resume)


def checkpoint_steps(checkpoint_root: str) -> list[int]:
    steps = [int(m.group(1)) for name in storage.list_names(checkpoint_root) if (m := _STEP_DIR.match(name))]
    return sorted(steps)


def latest_checkpoint(checkpoint_root: str) -> CheckpointInfo | None:
    """The newest committed checkpoint (None when there is none).

    rlaunch's `latest` marker is read, and SkyRL's own `latest_ckpt_global_step.txt` too (a run
    killed before the adapter mirrored it); the runtime digest and run fingerprint come from the
    checkpoint's metadata, else from what the runtime recorded at the checkpoint root when it started.
    """
    steps = []
    for name in (LATEST_MARKER, SKYRL_LATEST_MARKER):
        marker = storage.join(checkpoint_root, name)
        if storage.exists(marker):
            steps.append(parse_step_marker(storage.read_bytes(marker), marker))
    if not steps:
        return None
    return checkpoint_info(checkpoint_root, max(steps))


def checkpoint_info(checkpoint_root: str, step: int) -> CheckpointInfo:
    """The checkpoint of `step`: its path, and the digests it was written under."""
    path = checkpoint_dir(checkpoint_root, step)
    meta = storage.read_json(storage.join(path, CHECKPOINT_META)) or {}
    root = storage.read_json(storage.join(checkpoint_root, RUNTIME_FILE)) or {}
    return CheckpointInfo(
        step=step,
        path=path,
        runtime_digest=meta.get("runtime_digest") or root.get("runtime_digest"),
        fingerprint=meta.get("run_fingerprint") or root.get("run_fingerprint"),
    )
