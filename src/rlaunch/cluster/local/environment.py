"""The environment a local replica starts with: an allow-list, never the submitter's whole environment.

Credentials reach a job only when the caller puts them in `spec.env` on purpose; an unrelated
token exported in the submitting shell stays there (see `rlaunch.cluster.environment`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from rlaunch.cluster.environment import DEFAULTS, base_environment


def replica_environment(
    spec_env: Mapping[str, str],
    job_variables: Mapping[str, str],
    source: Mapping[str, str] = os.environ,
) -> dict[str, str]:
    """Allow-listed base, then defaults, then `spec.env` (see `GangBackend._check_spec_env`), then the job's RLAUNCH_* variables."""
    return {**base_environment(source), **DEFAULTS, **spec_env, **job_variables}
