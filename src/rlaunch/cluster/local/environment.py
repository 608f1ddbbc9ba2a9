"""The environment a replica starts with: an allow-list, never the submitter's whole environment.

Credentials reach a job only when the caller puts them in `spec.env` on purpose; an unrelated
token exported in the submitting shell stays there. The allow-list is what ordinary programs
need to find executables, a home directory and a locale.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from rlaunch.cluster.protocol import RANK_ENV, RENDEZVOUS_ENV

BASE_VARIABLES = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR")
BASE_PREFIXES = ("LC_",)
# Unbuffered Python output makes `logs --follow` show lines when they are printed; spec.env may override.
DEFAULTS = {"PYTHONUNBUFFERED": "1"}


def base_environment(source: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The allow-listed part of `source`."""
    return {k: v for k, v in source.items() if k in BASE_VARIABLES or k.startswith(BASE_PREFIXES)}


def check_spec_env(spec_env: Mapping[str, str], job_variables: Iterable[str]) -> None:
    """A job may not set the variables the backend owns: they would lie about rank or job id."""
    clashes = sorted(set(spec_env) & {*job_variables, RANK_ENV, RENDEZVOUS_ENV})
    if clashes:
        raise ValueError(f"JobSpec.env sets {clashes}, which the local backend sets for every replica; remove them")


def replica_environment(
    spec_env: Mapping[str, str],
    job_variables: Mapping[str, str],
    source: Mapping[str, str] = os.environ,
) -> dict[str, str]:
    """Allow-listed base, then defaults, then `spec.env` (see `check_spec_env`), then the job's RLAUNCH_* variables."""
    return {**base_environment(source), **DEFAULTS, **spec_env, **job_variables}
