"""Properties of artifact names and versions: any string is accepted or refused with a typed
`UserError` (never another exception), an accepted identity's path stays under the prefix, and no
two accepted identities' directories nest."""

from __future__ import annotations

import posixpath

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rlaunch import storage
from rlaunch.artifacts.identity import (
    MAX_NAME,
    MAX_SEGMENT,
    InvalidIdentityError,
    validate_name,
    validate_version,
)
from rlaunch.errors import UserError

PREFIX = "/prefix"
SETTINGS = settings(
    max_examples=500,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

VERSIONISH = st.sampled_from(["2026.11.30", "2026.11.30.1", "dev", "alice-dev", "2026.02.30", "2026.11.30-dev"])
VALID_SEGMENT = st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,11}", fullmatch=True)
SEGMENTS = st.one_of(
    VALID_SEGMENT,
    VALID_SEGMENT,
    VALID_SEGMENT,
    VALID_SEGMENT,
    VERSIONISH,
    st.sampled_from([".", "..", ".jobs", ".tmp", ".hidden", "", "models", "x" * 101, "s3:", "a b", "é"]),
    st.text(alphabet="abcxyz0129_.-", min_size=1, max_size=12),
    st.text(max_size=6),
)
NAMES = st.one_of(
    st.lists(SEGMENTS, min_size=1, max_size=4).map("/".join),
    st.lists(VALID_SEGMENT, min_size=1, max_size=3).map("/".join),
    st.text(max_size=40),
)
VERSIONS = st.one_of(
    VERSIONISH,
    st.from_regex(r"[0-9]{4}\.[0-9]{2}\.[0-9]{2}(\.[0-9]{1,3})?", fullmatch=True),
    st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,80}-dev", fullmatch=True),
    st.text(max_size=20),
)


def accepted(name: object, version: object) -> bool:
    try:
        validate_name(name)
        validate_version(version)
    except InvalidIdentityError as exc:
        assert isinstance(exc, UserError) and str(exc)
        event("refused")
        return False
    event("accepted")
    return True


@SETTINGS
@given(name=NAMES, version=VERSIONS)
def test_an_accepted_identity_stays_under_the_prefix(name: str, version: str) -> None:
    if not accepted(name, version):
        return
    path = storage.join(PREFIX, name, version)
    assert posixpath.normpath(path) == path and path.startswith(PREFIX + "/")
    segments = path[len(PREFIX) + 1 :].split("/")
    assert not any(s.startswith(".") for s in segments)
    assert all(len(s) <= MAX_SEGMENT for s in segments) and len(name) <= MAX_NAME


@SETTINGS
@given(a=st.tuples(NAMES, VERSIONS), b=st.tuples(NAMES, VERSIONS))
def test_no_accepted_artifact_directory_lies_inside_another(a: tuple[str, str], b: tuple[str, str]) -> None:
    if a == b or not (accepted(*a) and accepted(*b)):
        return
    path_a, path_b = storage.join(PREFIX, *a), storage.join(PREFIX, *b)
    assert path_a != path_b
    assert not path_a.startswith(path_b + "/") and not path_b.startswith(path_a + "/")


@SETTINGS
@given(outer=st.tuples(st.lists(SEGMENTS, min_size=1, max_size=3).map("/".join), VERSIONS), tail=SEGMENTS)
def test_a_name_built_inside_an_accepted_artifact_is_refused(outer: tuple[str, str], tail: str) -> None:
    """The nesting the issue found (`probe/x/2026.11.30` inside `probe/x@2026.11.30`), from any side."""
    name, version = outer
    if not accepted(name, version):
        return
    assert not accepted(f"{name}/{version}/{tail}".rstrip("/"), "2026.11.30")
    assert not accepted(f"{name}/{version}", "2026.11.30")
