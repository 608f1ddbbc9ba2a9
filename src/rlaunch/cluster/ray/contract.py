"""Names shared by the Ray backend, the gang driver, the replica tasks and the keeper.

Nothing here imports Ray: the keeper and `import rlaunch` must stay cheap.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

# -- variables ---------------------------------------------------------------------------------
# What `RayBackend.environment()` sets, so that `RayBackend.from_env()` inside a job reaches the
# same cluster with the same options. Ray itself sets RAY_ADDRESS inside a job (to the GCS
# address); rlaunch never relies on it outside the driver, and replicas never see it.
ADDRESS_ENV = "RLAUNCH_RAY_ADDRESS"
GCS_ADDRESS_ENV = "RLAUNCH_RAY_GCS_ADDRESS"
WORKING_DIR_ENV = "RLAUNCH_RAY_WORKING_DIR"
EXCLUDES_ENV = "RLAUNCH_RAY_EXCLUDES"
PY_EXECUTABLE_ENV = "RLAUNCH_RAY_PY_EXECUTABLE"
PIP_ENV = "RLAUNCH_RAY_PIP"
STRATEGY_ENV = "RLAUNCH_RAY_STRATEGY"
CHECK_CAPACITY_ENV = "RLAUNCH_RAY_CHECK_CAPACITY"
KILL_GRACE_ENV = "RLAUNCH_RAY_KILL_GRACE"
PRIORITY_ENV = "RLAUNCH_RAY_PRIORITY"
# Set for the driver only: the gang description (JSON, no secrets: env values travel separately).
GANG_ENV = "RLAUNCH_RAY_GANG"
# Set for every replica: where Ray placed it.
NODE_ID_ENV = "RLAUNCH_RAY_NODE_ID"
NODE_IP_ENV = "RLAUNCH_RAY_NODE_IP"
# Device visibility Ray sets for a task that holds accelerators; a replica keeps these.
DEVICE_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "NEURON_RT_VISIBLE_CORES",
    "TPU_VISIBLE_CHIPS",
    "ASCEND_RT_VISIBLE_DEVICES",
)

# -- job metadata (Ray job `metadata`, strings only, written once at submission) ----------------
META_NAME = "rlaunch.name"
META_PARENT = "rlaunch.parent"
META_LABELS = "rlaunch.labels"
META_REPLICAS = "rlaunch.replicas"
META_RESOURCES = "rlaunch.resources"
META_PLACEMENT = "rlaunch.placement"
META_SUBMITTED_AT = "rlaunch.submitted_at"
META_SUBMITTED_BY = "rlaunch.submitted_by"
META_PRIORITY = "rlaunch.priority"

# How a job's replicas are placed: the driver process itself holds the resources (entrypoint
# resources; top-level single-replica jobs such as a coordinator), or a placement group holds one
# bundle per replica (child jobs and every multi-replica gang).
ENTRYPOINT = "entrypoint"
PLACEMENT_GROUP = "placement_group"

# -- the driver's exit codes (how the Jobs API alone tells cancelled from failed) ---------------
EXIT_SUCCEEDED = 0
EXIT_FAILED = 1
EXIT_CANCELLED = 75

# -- log lines ----------------------------------------------------------------------------------
NOTE_PREFIX = "[rlaunch] "  # what the driver itself says (retries, the outcome)
OUTCOME_PREFIX = NOTE_PREFIX + "job "  # the driver's last line: "[rlaunch] job <state>: <message>"

# -- internal KV (namespace "rlaunch" in the cluster's GCS) --------------------------------------
KV_NAMESPACE = "rlaunch"


def state_key(job_id: str) -> str:
    """The driver's record of the job: state, message, replicas (attempts, exit codes, nodes)."""
    return f"ray-jobs/{job_id}/state"


def cancel_key(job_id: str) -> str:
    """The first cancel request: who, when, why (first writer wins)."""
    return f"ray-jobs/{job_id}/cancel"


def rendezvous_key(job_id: str) -> str:
    """Rank 0's rendezvous (`host:port` on its node), which the other ranks wait for."""
    return f"ray-jobs/{job_id}/rendezvous"


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def env_flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={raw!r} is not a boolean (use 1/0, true/false)")
