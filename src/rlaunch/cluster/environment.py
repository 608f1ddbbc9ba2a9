"""The environment a job gets from its submitter: allow-listed credentials and rlaunch settings.

Nothing else crosses. Backends start jobs from a minimal base environment, so a credential that
is not allow-listed never reaches a coordinator, a host or a trainer.
"""

from __future__ import annotations

import os

from rlaunch.secrets import FORWARD_ENV, forwarded_credentials

# Non-secret settings that decide where state lives and what code is loaded.
PLATFORM_SETTINGS = (
    "RLAUNCH_PREFIX",
    "RLAUNCH_TEMP_PREFIX",
    "RLAUNCH_REGION",
    "RLAUNCH_RUNTIME_CACHE",
    "RLAUNCH_RUNTIME_PLUGINS",
    "RLAUNCH_STAGING_ROOT",
    "RLAUNCH_KEEP_TASK_DIR",
    "RLAUNCH_LOCK_STALE_SECONDS",
    "RLAUNCH_LOCK_HEARTBEAT_SECONDS",
    FORWARD_ENV,
    "PYTHONPATH",
)


def job_environment() -> dict[str, str]:
    """What a submitted job inherits: rlaunch settings that are set, plus allow-listed credentials."""
    env = {name: os.environ[name] for name in PLATFORM_SETTINGS if os.environ.get(name)}
    env.update(forwarded_credentials())
    return env
