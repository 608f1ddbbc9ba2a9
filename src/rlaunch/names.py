"""Names: the one rule every name obeys, wherever it goes (job names, artifact names and versions,
labels, a document's run id), job names every scheduler accepts (DNS-label safe), and which
artifact versions are mutable (shared by the artifact graph and the gates).

A name ends up in a path, a scheduler's queue, a log line and a table row. Whitespace, control or
invisible characters and path separators corrupt each of those silently (a tab splits a column, a
newline forges a log line, a `/` makes a directory), so they are refused wherever a name enters,
by `name_refusal`, in the same words everywhere.
"""

from __future__ import annotations

import re

from rlaunch.errors import UserError

MAX_JOB_NAME = 63
# A label's key or value and a run id: an artifact identity (a name of up to 200 characters, `@` or
# `-`, a version of up to 64) or a module path, with room to spare.
MAX_LABEL = 512
_MUTABLE = re.compile(r"dev|[a-z0-9][a-z0-9_.-]*-dev")
_SHOWN = 40  # characters of an over-long value a message repeats


class InvalidNameError(UserError, ValueError):
    """A name that breaks the name rule; the message names the field, the value and the fix."""


def name_refusal(value: object, *, field: str, max_length: int, segments: bool = False) -> str | None:
    """Why `value` cannot be the name in `field` (None: it can): it must be a non-empty string of at
    most `max_length` characters with no whitespace, no control or invisible character and no path
    separator. `segments`: a `/`-separated path of names (an artifact name, an identity), whose `/`
    is allowed; a `\\` never is."""
    if not isinstance(value, str) or not value:
        return f"{field} must be a non-empty string; got {value!r}"
    for position, char in enumerate(value):
        kind = _hostile(char, segments)
        if kind:
            return (
                f"{field}={_shown(value)} contains {kind} {char!r} (U+{ord(char):04X}) at position {position}; "
                "remove it (names take no whitespace, control characters or path separators)"
            )
    if len(value) > max_length:
        return f"{field}={_shown(value)} is {len(value)} characters; at most {max_length}"
    return None


def check_name(value: object, *, field: str, max_length: int, segments: bool = False) -> str:
    """`value` if it obeys the name rule (`name_refusal`), else InvalidNameError naming `field`."""
    refusal = name_refusal(value, field=field, max_length=max_length, segments=segments)
    if refusal:
        raise InvalidNameError(refusal)
    assert isinstance(value, str)  # name_refusal refuses every other type
    return value


def job_name(value: object, *, field: str) -> str:
    """The name every scheduler accepts for the job name in `field`, which obeys the name rule
    (`sanitize_job_name` then only lowers case and folds other punctuation into `-`)."""
    return sanitize_job_name(check_name(value, field=field, max_length=MAX_JOB_NAME), field=field)


def is_mutable(version: str) -> bool:
    """True for `dev` / `<label>-dev`: such outputs are rebuilt on every run (any other valid
    version is a calendar version, immutable once built)."""
    return isinstance(version, str) and bool(_MUTABLE.fullmatch(version))


def sanitize_job_name(name: str, *, field: str = "job name") -> str:
    """A job name made from user values (an artifact's name and version): lowercase, `[a-z0-9.-]`
    only, no leading/trailing separators, at most 63 characters."""
    cleaned = re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-.")
    cleaned = re.sub(r"-{2,}", "-", cleaned)[:MAX_JOB_NAME].rstrip("-.")
    if not cleaned:
        raise InvalidNameError(f"{field}={name!r} has no usable characters; use letters or digits")
    return cleaned


def _hostile(char: str, segments: bool) -> str | None:
    """What makes `char` unfit for a name (None: nothing)."""
    if char.isspace():
        return "whitespace"
    if not char.isprintable():  # control, format (zero-width, bidirectional), unassigned, surrogate
        return "a control or invisible character"
    if char == "\\" or (char == "/" and not segments):
        return "a path separator"
    return None


def _shown(value: str) -> str:
    return repr(value) if len(value) <= _SHOWN else f"{value[:_SHOWN]!r}..."
