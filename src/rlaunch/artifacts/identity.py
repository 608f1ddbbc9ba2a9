"""Artifact names and versions: the explicit half of identity (`name@version`).

An artifact lives at `{prefix}/{name}/{version}`, so both parts are validated as path segments
when a step is constructed, long before anything is written: the name rule every name obeys
(`rlaunch.names.name_refusal`: no whitespace, control character or stray path separator, bounded
lengths: every segment fits a filesystem's 255-byte limit with room for rlaunch's suffixes), no
segment starting with `.`
(`.jobs`, `.tmp` and other hidden names are rlaunch's own), and no name segment shaped like a
version. The last rule is what keeps every artifact's directory out of every other's:
`probe/x/2026.11.30@V` would live inside `probe/x@2026.11.30`, and it is refused.
"""

from __future__ import annotations

import datetime as _dt
import re

from rlaunch.names import InvalidNameError, check_name, is_mutable

VERSION_GRAMMAR = (
    "YYYY.MM.DD or YYYY.MM.DD.N (immutable, e.g. 2026.11.30 or 2026.11.30.2), "
    "or dev / <label>-dev (mutable, rebuilt every run, e.g. alice-dev)"
)

# Patterns are applied with fullmatch and spell digits as [0-9]: `$` would accept a trailing
# newline and `\d` would accept non-ASCII digits, neither of which belongs in a storage path.
_CALENDAR = re.compile(r"([0-9]{4})\.([0-9]{2})\.([0-9]{2})(\.[0-9]+)?")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_NAME_CHARS = re.compile(r"[A-Za-z0-9_./-]+")


MAX_SEGMENT = 100
MAX_NAME = 200
MAX_VERSION = 64


class InvalidIdentityError(InvalidNameError):
    """A malformed artifact name or version."""


def _is_calendar(version: str) -> bool:
    match = _CALENDAR.fullmatch(version)
    if match is None:
        return False
    try:
        _dt.date(int(match.group(1)), int(match.group(2)), int(match.group(3)))
    except ValueError:
        return False
    return True


def validate_version(version: object, *, field: str = "version") -> str:
    """Return `version` if it follows the version grammar, else raise naming the grammar."""
    if not isinstance(version, str) or not version:
        raise InvalidIdentityError(f"{field} must be a non-empty string; got {version!r}. Use {VERSION_GRAMMAR}.")
    _checked(version, field, MAX_VERSION, segments=False)
    if _is_calendar(version) or is_mutable(version):
        return version
    raise InvalidIdentityError(f"{field}={version!r} is not a valid version. Use {VERSION_GRAMMAR}.")


def validate_name(name: object, *, field: str = "name") -> str:
    """Return `name` if it is a safe relative path such as `models/tiny-qwen3`."""
    name = _checked(name, field, MAX_NAME, segments=True)
    if not _NAME_CHARS.fullmatch(name):
        raise InvalidIdentityError(
            f"{field}={name!r} may contain only letters, digits, '_', '.', '-' and '/'; rename it"
        )
    if "//" in name:
        raise InvalidIdentityError(f"{field}={name!r} has an empty path segment ('//'); remove it")
    if any(segment == "." for segment in name.split("/")):
        raise InvalidIdentityError(f"{field}={name!r} has a '.' path segment (an alias of its parent); remove it")
    segments = name.split("/")
    for position, segment in enumerate(segments):
        if segment.startswith("."):
            raise InvalidIdentityError(
                f"{field}={name!r}: segment {segment!r} starts with '.'; such names are reserved "
                "(rlaunch keeps .jobs and .tmp under the prefix); rename it"
            )
        if len(segment) > MAX_SEGMENT:
            raise InvalidIdentityError(
                f"{field}={name[:40]!r}...: segment {segment[:20]!r}... is {len(segment)} characters; "
                f"at most {MAX_SEGMENT} per '/'-separated segment"
            )
        if _is_calendar(segment) or is_mutable(segment):
            owner = "/".join(segments[:position])
            clash = f" ({owner}@{segment})" if owner else ""
            raise InvalidIdentityError(
                f"{field}={name!r}: segment {segment!r} is shaped like a version; artifacts live at "
                f"prefix/name/version, so this one would sit inside another artifact's directory{clash}; "
                "rename the segment"
            )
    return name


def _checked(value: object, field: str, max_length: int, *, segments: bool) -> str:
    """`value` if it obeys the name rule every name obeys and stays under the prefix."""
    try:
        value = check_name(value, field=field, max_length=max_length, segments=segments)
    except InvalidNameError as exc:
        raise InvalidIdentityError(str(exc)) from None
    if "://" in value or _SCHEME.match(value):
        raise InvalidIdentityError(
            f"{field}={value!r} contains a URL scheme; names and versions are relative to the "
            "storage prefix (set RLAUNCH_PREFIX for the location)"
        )
    if ".." in value:
        raise InvalidIdentityError(f"{field}={value!r} contains '..'; artifacts cannot escape their prefix")
    if value.startswith("/") or value.endswith("/"):
        raise InvalidIdentityError(f"{field}={value!r} must not start or end with '/'; strip the slashes")
    return value
