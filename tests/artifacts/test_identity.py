"""Names and versions: the `name@version` half of identity, validated before anything runs."""

from __future__ import annotations

import pytest

from rlaunch.artifacts import InvalidIdentityError, is_mutable, validate_name, validate_version
from rlaunch.artifacts.identity import VERSION_GRAMMAR

from .helpers import make_step

IMMUTABLE = ["2026.06.28", "2026.11.30", "2026.11.30.1", "2026.11.30.12", "2024.02.29"]
MUTABLE = ["dev", "alice-dev", "exp.3-dev", "2026.11.30-dev", "a_b-dev"]
BAD_VERSIONS = [
    "v1",
    "llama3",
    "20260628",
    "2026-06-28",
    "",
    "2026.6.28",
    "26.06.28",
    "2026.06.28.",
    "2026.06.28.x",
    "2026.13.01",  # no month 13
    "2026.02.30",  # no such day
    "2025.02.29",  # not a leap year
    "Dev",
    "-dev",
    "alice-Dev",
    "devx",
    "latest",
    "2026.11.30\n",  # `$` would accept the newline
    "dev\n",
    "２０２６.１１.３０",  # non-ASCII digits
    " 2026.11.30",
    "s3://bucket-dev",
    "a..b-dev",
    "/dev",
    "dev/",
]


@pytest.mark.parametrize("version", IMMUTABLE)
def test_calendar_versions_are_valid_and_immutable(version):
    assert validate_version(version) == version
    assert not is_mutable(version)


@pytest.mark.parametrize("version", MUTABLE)
def test_dev_versions_are_valid_and_mutable(version):
    assert validate_version(version) == version
    assert is_mutable(version)


@pytest.mark.parametrize("version", BAD_VERSIONS)
def test_other_versions_are_rejected_with_the_grammar(version):
    with pytest.raises(InvalidIdentityError) as err:
        validate_version(version)
    message = str(err.value)
    if "://" not in version and ".." not in version and not version.startswith("/") and not version.endswith("/"):
        assert VERSION_GRAMMAR in message
        assert "YYYY.MM.DD" in message and "-dev" in message


@pytest.mark.parametrize("version", [None, 20260628, 2026.11])
def test_non_string_versions_are_rejected(version):
    with pytest.raises(InvalidIdentityError, match="YYYY.MM.DD"):
        validate_version(version)


@pytest.mark.parametrize("version", BAD_VERSIONS[:6])
def test_a_step_with_a_bad_version_is_refused_at_construction(version):
    with pytest.raises(InvalidIdentityError, match="models/tiny"):
        make_step("models/tiny", version)


@pytest.mark.parametrize("name", ["tokenizer", "models/tiny-qwen3", "data/gsm8k_v2/train", "a.b", "x-1/y_2"])
def test_valid_names(name):
    assert validate_name(name) == name
    assert make_step(name).name == name


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "non-empty"),
        ("s3://bucket/model", "URL scheme"),
        ("gs://b/m", "URL scheme"),
        ("file:x", "URL scheme"),
        ("memory://m", "URL scheme"),
        ("../escape", ".."),
        ("models/../../etc", ".."),
        ("a..b", ".."),
        ("/abs/path", "start or end"),
        ("models/", "start or end"),
        ("a//b", "empty path segment"),
        ("a/./b", "'.' path segment"),
        ("has space", "only letters"),
        ("name\n", "only letters"),
        ("name@2026", "only letters"),
    ],
)
def test_invalid_names_are_rejected_naming_the_problem(name, fragment):
    with pytest.raises(InvalidIdentityError) as err:
        validate_name(name)
    assert fragment in str(err.value)
    with pytest.raises(InvalidIdentityError):
        make_step(name)


def test_non_string_name_is_rejected():
    with pytest.raises(InvalidIdentityError):
        validate_name(None)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("models/" + "x" * 150, "segment 'xxxxxxxxxxxxxxxxxxxx'... is 150 characters; at most 100"),
        ("models/" + "x" * 300, "is 307 characters; at most 200"),
        ("/".join(["abcdefghij"] * 25), "is 274 characters; at most 200"),
        (".jobs", "segment '.jobs' starts with '.'; such names are reserved"),
        (".tmp/x", "segment '.tmp' starts with '.'"),
        ("models/.hidden", "segment '.hidden' starts with '.'"),
        ("probe/x/2026.11.30", "would sit inside another artifact's directory (probe/x@2026.11.30)"),
        ("probe/dev/x", "segment 'dev' is shaped like a version"),
        ("alice-dev/model", "segment 'alice-dev' is shaped like a version"),
    ],
)
def test_names_that_would_collide_or_overflow_are_refused(name: str, fragment: str) -> None:
    with pytest.raises(InvalidIdentityError) as err:
        make_step(name)
    assert fragment in str(err.value)


def test_long_versions_are_refused() -> None:
    with pytest.raises(InvalidIdentityError, match="at most 64"):
        validate_version("a" * 300 + "-dev")


def test_no_artifact_directory_lies_inside_another() -> None:
    """The nesting case from the issue: `probe/x/2026.11.30@V` would be built inside `probe/x@2026.11.30`."""
    outer = make_step("probe/x", "2026.11.30")
    assert outer.path("/p") == "/p/probe/x/2026.11.30"
    with pytest.raises(InvalidIdentityError, match="probe/x@2026.11.30"):
        make_step("probe/x/2026.11.30", "2026.11.30")
