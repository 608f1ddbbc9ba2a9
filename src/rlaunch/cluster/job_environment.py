"""The environment a job gets: allow-listed credentials and rlaunch settings from its submitter,
and for each replica an allow-listed base of the machine it runs on.

Nothing else crosses. Backends start jobs from a minimal base environment, so a credential that
is not allow-listed never reaches a coordinator, a host or a trainer. The base is what ordinary
programs need to find executables, a home directory and a locale.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping

from rlaunch.secrets import FORWARD_ENV, forwarded_credentials, listed_names

BASE_VARIABLES = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR")
BASE_PREFIXES = ("LC_",)
# Unbuffered Python output makes `logs --follow` show lines when they are printed; spec.env may override.
DEFAULTS = {"PYTHONUNBUFFERED": "1"}

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
    # Where a runtime build inside a job finds wheels (pip's, which uv is given): a machine whose
    # CPU torch is a local wheel keeps it there. Index URLs are not forwarded (they may hold a token).
    "PIP_FIND_LINKS",
    "PIP_CONFIG_FILE",
)


def job_environment(declared: tuple[str, ...] = ()) -> dict[str, str]:
    """What a submitted job inherits: rlaunch settings that are set, plus allow-listed credentials
    and the `declared` ones (the launch's `run.credentials`). Declared names join the job's
    RLAUNCH_FORWARD_CREDENTIALS, so the job forwards them onwards and scrubs their values."""
    env = {name: os.environ[name] for name in PLATFORM_SETTINGS if os.environ.get(name)}
    env.update(forwarded_credentials(declared))
    listed = tuple(dict.fromkeys((*listed_names(os.environ), *declared)))
    if listed:
        env[FORWARD_ENV] = ",".join(listed)
    return env


def base_environment(source: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The allow-listed part of `source`."""
    return {k: v for k, v in source.items() if k in BASE_VARIABLES or k.startswith(BASE_PREFIXES)}


def replica_base(job_env: Mapping[str, str], source: Mapping[str, str] = os.environ) -> dict[str, str]:
    """What a replica starts from: the allow-listed base of `source` (its machine), the defaults,
    then `job_env` (spec.env and the backend's RLAUNCH_* variables, which it refuses spec.env to set)."""
    return {**base_environment(source), **DEFAULTS, **job_env}


def free_port(host: str = "") -> int:
    """A TCP port free on this machine now (a gang's rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port
