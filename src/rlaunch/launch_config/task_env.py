"""The trainer's task environment: fixed values and names passed through from the submitter.

Runtime profiles (`profile.yaml`) and executions declare `task_env` (fixed `NAME: value` pairs) and
`env_passthrough` (names, or `PREFIX*` patterns such as `NCCL_*`, copied from the submitting
environment). The submitting process hands the matching variables to the coordinator job; the
coordinator renders them, with the fixed values, into the launch document's `cluster.task_env`,
which the child gang's every task and trainer gets. Credentials never travel this way: a name that
looks like a credential is refused in `task_env` and skipped by `env_passthrough`; credentials
come only from the allow-list (`HF_TOKEN`, `WANDB_API_KEY`, `RLAUNCH_FORWARD_CREDENTIALS`).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable, Mapping

from rlaunch.secrets import is_secret_name

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")
RESERVED_PREFIX = "RLAUNCH_"  # rlaunch's own settings travel as platform settings, not task env


def check_task_env(owner: str, task_env: object, passthrough: object) -> tuple[dict[str, str], tuple[str, ...]]:
    """Normalised (task_env, env_passthrough), or a ValueError/TypeError naming the field and the fix."""
    if not isinstance(task_env, Mapping):
        raise TypeError(f"{owner}.task_env must be a mapping of NAME -> string value, got {task_env!r}")
    env: dict[str, str] = {}
    for name, value in task_env.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"{owner}.task_env key {name!r} is not an environment variable name (A-Z, 0-9, _)")
        if not isinstance(value, str):
            raise TypeError(f"{owner}.task_env[{name!r}] must be a string, got {value!r}; quote it")
        _check_name(owner, "task_env", name)
        env[name] = value
    if isinstance(passthrough, str) or not isinstance(passthrough, (tuple, list)):
        raise TypeError(f"{owner}.env_passthrough must be a tuple of names or PREFIX* patterns, got {passthrough!r}")
    for pattern in passthrough:
        if not isinstance(pattern, str) or not _PATTERN.match(pattern):
            raise ValueError(
                f"{owner}.env_passthrough entry {pattern!r} must be a variable name or a PREFIX* pattern (e.g. NCCL_*)"
            )
        _check_name(owner, "env_passthrough", pattern.rstrip("*"))
    return env, tuple(passthrough)


def _check_name(owner: str, field: str, name: str) -> None:
    if name.startswith(RESERVED_PREFIX):
        raise ValueError(f"{owner}.{field} may not set {name!r}: RLAUNCH_* settings are rlaunch's own")
    if name and is_secret_name(name):
        raise ValueError(
            f"{owner}.{field} may not carry the credential-like {name!r}; credentials are forwarded only through "
            "the allow-list (HF_TOKEN, WANDB_API_KEY, or name it in RLAUNCH_FORWARD_CREDENTIALS)"
        )


def passed_through(patterns: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of `environ` (default: this process) that `patterns` select, credentials excluded."""
    source = os.environ if environ is None else environ
    selected = {}
    for name, value in source.items():
        if is_secret_name(name) or name.startswith(RESERVED_PREFIX):
            continue
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            selected[name] = value
    return dict(sorted(selected.items()))


def task_environment(
    fixed: Iterable[Mapping[str, str]], patterns: Iterable[str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """What the trainer gets: passed-through values, overridden by the fixed ones (later wins)."""
    env = passed_through(tuple(patterns), environ)
    for layer in fixed:
        env.update(layer)
    return env
