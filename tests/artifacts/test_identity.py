"""Names and versions: the `name@version` half of identity, validated before anything runs."""

from __future__ import annotations

import pytest

from rlaunch.artifacts import InvalidIdentityError, is_mutable, validate_name, validate_version
from rlaunch.artifacts.identity import VERSION_GRAMMAR

from .helpers import make_step

RULE_FIX = "remove it (names take no whitespace, control characters or path separators)"

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
    # a version that is no name at all (whitespace, a '/', '..') is refused in the name rule's words
    if not any(char.isspace() or char == "/" for char in version) and ".." not in version:
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
        ("has space", "contains whitespace ' '"),
        ("name\n", "contains whitespace '\\n'"),
        ("tab\tbed", "contains whitespace '\\t'"),
        ("a\\b", "contains a path separator '\\\\'"),
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


def _refusal(validate, value, **field) -> str:
    """The message `validate` refuses `value` with."""
    with pytest.raises(InvalidIdentityError) as err:
        validate(value, **field)
    return str(err.value)


@pytest.mark.parametrize(
    ("version", "message"),
    [
        (None, f"version must be a non-empty string; got None. Use {VERSION_GRAMMAR}."),
        ("", f"version must be a non-empty string; got ''. Use {VERSION_GRAMMAR}."),
        ("v1", f"version='v1' is not a valid version. Use {VERSION_GRAMMAR}."),
        ("a" * 61 + "-dev", f"version={'a' * 40!r}... is 65 characters; at most 64"),
        (
            "x:1",
            "version='x:1' contains a URL scheme; names and versions are relative to the storage prefix "
            "(set RLAUNCH_PREFIX for the location)",
        ),
        ("a..b-dev", "version='a..b-dev' contains '..'; artifacts cannot escape their prefix"),
        ("dev/", f"version='dev/' contains a path separator '/' (U+002F) at position 3; {RULE_FIX}"),
        ("2026.11.30\t", f"version='2026.11.30\\t' contains whitespace '\\t' (U+0009) at position 10; {RULE_FIX}"),
    ],
)
def test_a_refused_version_says_which_field_what_is_wrong_and_the_fix(version, message):
    assert _refusal(validate_version, version) == message
    assert _refusal(validate_version, version, field="--override data/toy") == message.replace(
        "version", "--override data/toy", 1
    )


def test_the_longest_version_is_accepted():
    longest = "a" * 60 + "-dev"
    assert len(longest) == 64 and validate_version(longest) == longest


@pytest.mark.parametrize("value", [None, 20261130, b"dev", ["dev"]])
def test_only_strings_can_be_mutable_versions(value):
    assert is_mutable(value) is False


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (None, "name must be a non-empty string; got None"),
        ("", "name must be a non-empty string; got ''"),
        (
            "9://x",
            "name='9://x' contains a URL scheme; names and versions are relative to the storage prefix "
            "(set RLAUNCH_PREFIX for the location)",
        ),
        (
            "c:data",
            "name='c:data' contains a URL scheme; names and versions are relative to the storage prefix "
            "(set RLAUNCH_PREFIX for the location)",
        ),
        ("a/../b", "name='a/../b' contains '..'; artifacts cannot escape their prefix"),
        ("/abs", "name='/abs' must not start or end with '/'; strip the slashes"),
        ("a b", f"name='a b' contains whitespace ' ' (U+0020) at position 1; {RULE_FIX}"),
        ("a@b", "name='a@b' may contain only letters, digits, '_', '.', '-' and '/'; rename it"),
        ("a//b", "name='a//b' has an empty path segment ('//'); remove it"),
        ("a/./b", "name='a/./b' has a '.' path segment (an alias of its parent); remove it"),
        (".", "name='.' has a '.' path segment (an alias of its parent); remove it"),
        ("x" * 201, f"name={'x' * 40!r}... is 201 characters; at most 200"),
        (
            "models/.cache",
            "name='models/.cache': segment '.cache' starts with '.'; such names are reserved "
            "(rlaunch keeps .jobs and .tmp under the prefix); rename it",
        ),
        (
            "m/" + "y" * 101,
            f"name={('m/' + 'y' * 101)[:40]!r}...: segment {'y' * 20!r}... is 101 characters; "
            "at most 100 per '/'-separated segment",
        ),
        (
            "probe/x/2026.11.30",
            "name='probe/x/2026.11.30': segment '2026.11.30' is shaped like a version; artifacts live at "
            "prefix/name/version, so this one would sit inside another artifact's directory "
            "(probe/x@2026.11.30); rename the segment",
        ),
        (
            "dev/x",
            "name='dev/x': segment 'dev' is shaped like a version; artifacts live at prefix/name/version, so "
            "this one would sit inside another artifact's directory; rename the segment",
        ),
    ],
)
def test_a_refused_name_says_which_field_what_is_wrong_and_the_fix(name, message):
    assert _refusal(validate_name, name) == message
    assert _refusal(validate_name, name, field="deps[0].name") == message.replace("name", "deps[0].name", 1)


@pytest.mark.parametrize(
    ("name", "clash"),
    [
        ("abdev/dev", "abdev@dev"),  # the segment's text also occurs earlier in the name
        ("data/2026.11.30x/2026.11.30/y", "data/2026.11.30x@2026.11.30"),
        ("runs/alice-dev", "runs@alice-dev"),
    ],
)
def test_a_version_shaped_segment_names_the_artifact_it_would_sit_inside(name, clash):
    assert _refusal(validate_name, name).endswith(f"directory ({clash}); rename the segment")


def test_the_longest_name_and_segment_are_accepted():
    segment = "s" * 100
    assert validate_name(segment) == segment
    longest = "/".join([segment, "t" * 99])
    assert len(longest) == 200 and validate_name(longest) == longest
