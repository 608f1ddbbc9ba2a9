"""Credentials: which environment values may leave this process, and which must never be shown.

Only allow-listed credentials are forwarded to jobs (`HF_TOKEN`, `WANDB_API_KEY`, plus names in
`RLAUNCH_FORWARD_CREDENTIALS`, comma separated). Values of anything that looks like a credential are
collected so that argv, logs and records can be scrubbed of them.
"""

from __future__ import annotations

import os
import re

DEFAULT_FORWARDED = ("HF_TOKEN", "WANDB_API_KEY")
FORWARD_ENV = "RLAUNCH_FORWARD_CREDENTIALS"
_SECRET_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL)", re.I)
_MIN_SECRET_LENGTH = 6


def forwarded_names(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    configured = tuple(n.strip() for n in os.environ.get(FORWARD_ENV, "").split(",") if n.strip())
    names: list[str] = []
    for name in (*DEFAULT_FORWARDED, *configured, *extra):
        if name not in names:
            names.append(name)
    return tuple(names)


def forwarded_credentials(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """The allow-listed credentials that are set in this environment (name -> value)."""
    return {name: os.environ[name] for name in forwarded_names(extra) if os.environ.get(name)}


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) or name in forwarded_names()


def secret_values(env: dict[str, str] | None = None) -> list[str]:
    """Values that must never be printed, logged or recorded (longest first, for replacement)."""
    source = os.environ if env is None else env
    values = {v for k, v in source.items() if is_secret_name(k) and len(v) >= _MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def scrub(text: str, env: dict[str, str] | None = None) -> str:
    for value in secret_values(env):
        text = text.replace(value, "<redacted>")
    return text
