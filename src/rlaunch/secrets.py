"""Credentials: which environment values may leave this process, and which must never be shown.

Only allow-listed credentials are forwarded to jobs (`HF_TOKEN`, `WANDB_API_KEY`, plus names in
`RLAUNCH_FORWARD_CREDENTIALS`, comma separated, plus the names a launch declares:
`SkyRLSpec(credentials=...)`, which a job's environment lists in its own
`RLAUNCH_FORWARD_CREDENTIALS` so every later hop forwards and scrubs them too). Two things count as
a secret when scrubbing logs, recorded argv, records and documents:

* the value of any environment variable with a credential-like name (a name containing TOKEN,
  SECRET, PASSWORD, PASSPHRASE, API_KEY, ACCESS_KEY, PRIVATE_KEY or CREDENTIAL, or ending in
  `_KEY`), or a forwarded one, whether or not it is forwarded: every rlaunch process that writes or
  prints a log scrubs the secrets of its own environment (`Scrubber.for_process`) besides those of
  the job's, and a submitter hands its own to the job's supervisor in memory. Values shorter than
  `MIN_SECRET_LENGTH` (6) characters are left alone, so a short common word is never blanked;
* any value of a well-known token shape, wherever it came from: Hugging Face `hf_…`, GitHub
  `ghp_…`/`github_pat_…`, `sk-…` API keys, AWS access key ids `AKIA…`/`ASIA…`, and 40-hex W&B
  keys where a W&B key name introduces them (a bare 40-hex string is a git commit as often as
  not, so it is left alone).

A credential on the command line is refused outright (`refuse_secret_arguments`): argv is
recorded in job specs and run records, so secrets travel through the environment only.
"""

from __future__ import annotations

import builtins
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from rlaunch.errors import UserError

DEFAULT_FORWARDED = ("HF_TOKEN", "WANDB_API_KEY")
FORWARD_ENV = "RLAUNCH_FORWARD_CREDENTIALS"
REDACTED = "<redacted>"
_SECRET_NAME = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|API_KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIAL|(?:^|_)KEY$)", re.I
)
MIN_SECRET_LENGTH = 6
_MAX_SHAPE_LENGTH = 200  # no token shape below matches more than this many characters

_BEFORE = r"(?<![A-Za-z0-9_])"
TOKEN_SHAPES: tuple[tuple[str, str], ...] = (
    ("a Hugging Face token (hf_...)", _BEFORE + r"hf_(?=[a-z0-9]{0,190}[A-Z])[A-Za-z0-9]{30,190}"),
    ("a GitHub token (ghp_...)", _BEFORE + r"gh[pousr]_[A-Za-z0-9]{36,190}"),
    ("a GitHub token (github_pat_...)", _BEFORE + r"github_pat_[A-Za-z0-9_]{22,180}"),
    # random base62: a digit and a capital somewhere (job and artifact names are lower case)
    (
        "an API key (sk-...)",
        _BEFORE + r"sk-(?=[A-Za-z0-9_-]{0,190}[0-9])(?=[a-z0-9_-]{0,190}[A-Z])[A-Za-z0-9_-]{20,190}",
    ),
    ("an AWS access key id (AKIA...)", _BEFORE + r"(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"),
)
# A W&B key is 40 hex digits: a secret only where a W&B key name introduces it (group 1 is the key).
_WANDB = r"(?i:wandb[a-z_-]{0,20}key)[\"']?\s{0,4}[=:]\s{0,4}[\"']?([0-9a-f]{40})(?![0-9a-f])"
_SHAPES = re.compile("|".join(f"(?:{pattern})" for _, pattern in TOKEN_SHAPES))
_SHAPES_BYTES = re.compile(_SHAPES.pattern.encode())
_WANDB_TEXT = re.compile(_WANDB)
_WANDB_BYTES = re.compile(_WANDB.encode())


class SecretArgumentError(UserError, ValueError):
    """A credential given on the command line (it would be recorded); it must come from the environment."""


def listed_names(env: Mapping[str, str]) -> tuple[str, ...]:
    """The names `env`'s own RLAUNCH_FORWARD_CREDENTIALS lists."""
    return tuple(n.strip() for n in env.get(FORWARD_ENV, "").split(",") if n.strip())


def forwarded_names(extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    configured = listed_names(os.environ)
    names: list[str] = []
    for name in (*DEFAULT_FORWARDED, *configured, *extra):
        if name not in names:
            names.append(name)
    return tuple(names)


def forwarded_credentials(extra: tuple[str, ...] = ()) -> dict[str, str]:
    """The allow-listed credentials that are set in this environment (name -> value)."""
    return {name: os.environ[name] for name in forwarded_names(extra) if os.environ.get(name)}


_CREDENTIAL_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def credential_name_problem(name: object) -> str | None:
    """Why `name` cannot be a declared credential (None: it can). A declaration names the variable;
    what stands in a name's place may be the credential itself, so it is never echoed: the refusal
    says what kind of text it is and which rule it breaks."""
    if isinstance(name, str) and _CREDENTIAL_NAME.fullmatch(name):
        return None
    return (
        f"{_described(name)} is not an environment variable name: declare the NAME of the variable the job reads "
        "(upper-case letters, digits and '_', not starting with a digit), e.g. 'HF_TOKEN'; its value stays "
        "in the environment"
    )


def _described(value: object) -> str:
    """What was given in a name's place, without its letters or digits (it may be a token)."""
    if not isinstance(value, str):
        return f"a value of type {type(value).__name__} (not shown)"
    if not value:
        return "an empty text"
    kinds = []
    if secret_kind(value, {}):
        kinds.append("shaped like a credential")
    if value[0].isdigit():
        kinds.append("starting with a digit")
    if any(c.islower() for c in value):
        kinds.append("with lower-case letters")
    if any(c.isspace() for c in value):
        kinds.append("with whitespace")
    other = sorted({c for c in value if not (c.isalnum() or c == "_" or c.isspace())})
    if other:
        kinds.append(f"with {' '.join(repr(c) for c in other)}")
    return f"a text of {len(value)} character{'s' * (len(value) != 1)}{''.join(' ' + k for k in [', '.join(kinds)] if k)} (not shown)"


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name)) or name in forwarded_names()


def secret_values(env: dict[str, str] | None = None) -> list[str]:
    """Values that must never be printed, logged or recorded (longest first, for replacement);
    a name `env` itself lists as forwarded (a declared credential in a job's environment) counts."""
    source = os.environ if env is None else env
    listed = set(listed_names(source))
    values = {v for k, v in source.items() if (is_secret_name(k) or k in listed) and len(v) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


class Scrubber:
    """Replaces secret values and token shapes in text or bytes (one instance per set of values)."""

    def __init__(self, values: Iterable[str]) -> None:
        self.values = sorted({v for v in values if v}, key=len, reverse=True)
        self._values_bytes = [v.encode() for v in self.values]
        # Bytes held back at a cut so no secret can straddle it (see `safe_cut`).
        self.overlap = max([_MAX_SHAPE_LENGTH + 64, *(len(v) for v in self._values_bytes)])

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Scrubber:
        return cls(secret_values(env))

    @classmethod
    def for_process(cls, *envs: Mapping[str, str], known: Iterable[str] = ()) -> Scrubber:
        """For a process that writes or prints a log: the secrets of its own environment, of each
        environment it hands a job, and `known` values a submitter passed on (forwarded or not)."""
        values = [*secret_values(), *known]
        for env in envs:
            values += secret_values(dict(env))
        return cls(values)

    def text(self, text: str) -> str:
        for value in self.values:
            text = text.replace(value, REDACTED)
        text = _SHAPES.sub(REDACTED, text)
        return _WANDB_TEXT.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + REDACTED, text)

    def bytes(self, data: bytes) -> bytes:
        for value in self._values_bytes:
            data = data.replace(value, REDACTED.encode())
        data = _SHAPES_BYTES.sub(REDACTED.encode(), data)
        return _WANDB_BYTES.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + REDACTED.encode(), data)

    def safe_cut(self, data: builtins.bytes) -> int:  # `bytes` in this class is the method above
        """Where a long unterminated line may be cut: before its last `overlap` bytes, and never
        inside a secret (the bytes after the cut are kept and scrubbed with what follows)."""
        cut = max(len(data) - self.overlap, 0)
        spans = [m.span() for m in _SHAPES_BYTES.finditer(data)] + [m.span() for m in _WANDB_BYTES.finditer(data)]
        for value in self._values_bytes:
            start = data.find(value, max(cut - len(value), 0))
            while start != -1 and start < cut:
                spans.append((start, start + len(value)))
                start = data.find(value, start + 1)
        for start, end in sorted(spans, reverse=True):
            if start < cut < end:
                cut = start
        return cut

    def tree(self, value: Any) -> Any:
        """A JSON-like value with every string scrubbed (keys included)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.tree(k) if isinstance(k, str) else k: self.tree(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.tree(v) for v in value]
        return value


def scrub(text: str, env: dict[str, str] | None = None) -> str:
    """`text` without the environment's secret values or any token-shaped value."""
    return Scrubber.from_env(env).text(text)


def scrub_tree(value: Any, env: dict[str, str] | None = None) -> Any:
    """A record (dicts, lists, strings) with every string scrubbed, for writing to storage."""
    return Scrubber.from_env(env).tree(value)


def secret_kind(text: str, env: dict[str, str] | None = None) -> str | None:
    """What kind of credential `text` carries (never the value itself), or None."""
    source = os.environ if env is None else env
    for name, value in source.items():
        credential = name in forwarded_names() or _names_a_secret(f"--{name}")
        if credential and len(value) >= MIN_SECRET_LENGTH and value in text:
            return f"the value of ${name}"
    for description, pattern in TOKEN_SHAPES:
        if re.search(pattern, text):
            return description
    if _WANDB_TEXT.search(text):
        return "a W&B API key"
    return None


def refuse_secret_arguments(argv: Iterable[str], env: dict[str, str] | None = None) -> None:
    """Refuse a command line that carries a credential (SecretArgumentError names where, not what)."""
    args = list(argv)
    for index, arg in enumerate(args):
        kind = secret_kind(arg, env)
        if kind is None and index > 0 and _names_a_secret(args[index - 1]) and len(arg) >= MIN_SECRET_LENGTH:
            kind = f"the value of {args[index - 1].split('=', 1)[0]}"
        if kind is None:
            option, sep, _ = arg.partition("=")
            if sep and option.startswith("-") and _names_a_secret(option):
                kind = f"the value of {option}"
        if kind is None:
            continue
        flag = next((a.split("=", 1)[0] for a in reversed(args[: index + 1]) if a.startswith("-")), None)
        where = f"argument {index + 1}" + (f" (of {flag})" if flag else "")
        raise SecretArgumentError(
            f"{where} carries {kind}: credentials are never taken from the command line (argv is "
            "recorded in job specs and run records). Pass it through the environment instead "
            f"(HF_TOKEN, WANDB_API_KEY, or a name listed in {FORWARD_ENV}) and drop it from the command"
        )


def refuse_secrets_in(value: Any, where: str, path: str = "") -> None:
    """Refuse a document or record that carries a credential (SecretArgumentError names the field)."""
    if isinstance(value, dict):
        for key, item in value.items():
            refuse_secrets_in(item, where, f"{path}.{key}" if path else str(key))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            refuse_secrets_in(item, where, f"{path}[{index}]")
    elif isinstance(value, str):
        kind = secret_kind(value)
        if kind is not None:
            raise SecretArgumentError(
                f"{where} field {path or '(top level)'} carries {kind}: a credential never goes into a document "
                f"(documents are stored and recorded). Read it from the environment in the trainer instead "
                f"(HF_TOKEN, WANDB_API_KEY, or a name listed in {FORWARD_ENV})"
            )


def _names_a_secret(option: str) -> bool:
    """`--hf-token`, `--api_key`, `--wandb-key`: an option whose value is a credential."""
    if not option.startswith("-"):
        return False
    name = option.lstrip("-").split("=", 1)[0].replace("-", "_").upper()
    return bool(re.search(r"(TOKEN$|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY|WANDB_KEY)", name))
