"""The name rule (`rlaunch.names`): every name (a job name, an artifact's name and version, a label,
a run id) is refused for whitespace, a control or invisible character, a path separator or its
length, in one set of words, whatever the rest of the string is; the legal alphabet goes through
unchanged."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlaunch.artifacts import InvalidIdentityError, validate_name, validate_version
from rlaunch.errors import UserError
from rlaunch.names import (
    MAX_JOB_NAME,
    MAX_LABEL,
    InvalidNameError,
    check_name,
    job_name,
    name_refusal,
    sanitize_job_name,
)

SETTINGS = settings(max_examples=300, deadline=None, database=None, derandomize=True)
FIX = "remove it (names take no whitespace, control characters or path separators)"
LEGAL = string.ascii_letters + string.digits + "._-@:+"
# Whitespace of every kind, C0/C1 controls, DEL, zero-width and bidirectional format characters, a
# lone surrogate, private use and unassigned code points, and both path separators.
HOSTILE = [
    " ", "\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u2028", "\u3000",
    "\x00", "\x07", "\x1b", "\x7f", "\x9b", "\u200b", "\u200e", "\u202e", "\ufeff", "\ud800", "\ue000", "\U000e0001",
    "/", "\\",
]  # fmt: skip
HOSTILE_CHARS = st.one_of(
    st.sampled_from(HOSTILE),
    st.characters(categories=["Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co"]),
)


@SETTINGS
@given(
    before=st.text(alphabet=LEGAL, max_size=20),
    hostile=HOSTILE_CHARS,
    after=st.text(max_size=20),
    max_length=st.sampled_from([MAX_JOB_NAME, MAX_LABEL]),
)
def test_a_name_with_a_hostile_character_anywhere_is_refused(
    before: str, hostile: str, after: str, max_length: int
) -> None:
    """Whatever surrounds it, the first hostile character is named with its position."""
    value = before + hostile + after
    refusal = name_refusal(value, field="f", max_length=max_length)
    assert refusal is not None and refusal.startswith("f=")
    assert refusal.endswith(f" {hostile!r} (U+{ord(hostile):04X}) at position {len(before)}; {FIX}")
    with pytest.raises(InvalidNameError):
        check_name(value, field="f", max_length=max_length)
    with pytest.raises(InvalidNameError, match="^JobSpec.name="):
        job_name(value, field="JobSpec.name")


@SETTINGS
@given(value=st.text(alphabet=LEGAL, min_size=1, max_size=MAX_JOB_NAME))
def test_the_legal_alphabet_goes_through_unchanged(value: str) -> None:
    assert name_refusal(value, field="f", max_length=MAX_JOB_NAME) is None
    assert check_name(value, field="f", max_length=MAX_JOB_NAME) is value
    assert check_name(value.replace("-", "/"), field="f", max_length=MAX_JOB_NAME, segments=True) == value.replace(
        "-", "/"
    )


@SETTINGS
@given(value=st.from_regex(r"[a-z0-9]([a-z0-9]|[.-](?=[a-z0-9])){0,62}", fullmatch=True))
def test_a_scheduler_safe_job_name_is_its_own_job_name(value: str) -> None:
    assert job_name(value, field="cluster.job_name") == value


@SETTINGS
@given(value=st.text(max_size=80))
def test_any_string_is_a_job_name_or_a_named_refusal(value: str) -> None:
    """Never another exception, and a refusal always names the field."""
    try:
        name = job_name(value, field="cluster.job_name")
    except InvalidNameError as exc:
        assert isinstance(exc, UserError) and str(exc).startswith("cluster.job_name")
    else:
        assert 1 <= len(name) <= MAX_JOB_NAME and not any(c.isspace() or c in "/\\" for c in name)


@pytest.mark.parametrize(("max_length", "segments"), [(MAX_JOB_NAME, False), (MAX_LABEL, True), (1, False)])
def test_the_longest_name_is_accepted_and_one_more_character_is_refused(max_length: int, segments: bool) -> None:
    longest = "a" * max_length
    assert check_name(longest, field="f", max_length=max_length, segments=segments) == longest
    shown = repr(longest + "a") if max_length < 40 else f"{longest[:40]!r}..."
    assert name_refusal(longest + "a", field="f", max_length=max_length, segments=segments) == (
        f"f={shown} is {max_length + 1} characters; at most {max_length}"
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("rl-run\n", f"cluster.job_name='rl-run\\n' contains whitespace '\\n' (U+000A) at position 6; {FIX}"),
        ("rl\trun", f"cluster.job_name='rl\\trun' contains whitespace '\\t' (U+0009) at position 2; {FIX}"),
        ("rl/run", f"cluster.job_name='rl/run' contains a path separator '/' (U+002F) at position 2; {FIX}"),
        (
            "rl\x00",
            f"cluster.job_name='rl\\x00' contains a control or invisible character '\\x00' (U+0000) at position 2; {FIX}",
        ),
        ("a" * 64, f"cluster.job_name={'a' * 40!r}... is 64 characters; at most 63"),
        ("", "cluster.job_name must be a non-empty string; got ''"),
        (None, "cluster.job_name must be a non-empty string; got None"),
        ("-.-", "cluster.job_name='-.-' has no usable characters; use letters or digits"),
    ],
    ids=["trailing-newline", "tab", "slash", "nul", "over-long", "empty", "none", "nothing-usable"],
)
def test_a_refused_job_name_says_which_field_what_is_wrong_and_the_fix(value: object, message: str) -> None:
    with pytest.raises(InvalidNameError) as err:
        job_name(value, field="cluster.job_name")
    assert str(err.value) == message


@pytest.mark.parametrize("value", ["dev\n", "2026.11.30\n", "rl-run\n", "a" * 63 + "\n", "ok\t", "ok/"])
def test_a_name_legal_only_as_a_prefix_is_refused_whole(value: str) -> None:
    """The whole string is judged: a legal name followed by a hostile character is no name (the
    trailing newline a `$` anchor would let through)."""
    assert name_refusal(value[:-1], field="f", max_length=MAX_JOB_NAME) is None
    assert name_refusal(value, field="f", max_length=MAX_JOB_NAME) is not None
    with pytest.raises(InvalidNameError):
        job_name(value, field="f")


@pytest.mark.parametrize("value", ["rl\trun", "rl\nrun", "rl/run", "rl run"])
def test_artifact_names_versions_and_job_names_refuse_in_the_same_words(value: str) -> None:
    """One rule: the artifact identity's refusals are the ground rule's, word for word."""
    rule = name_refusal(value, field="f", max_length=MAX_JOB_NAME)
    with pytest.raises(InvalidIdentityError) as version:
        validate_version(value, field="f")
    assert str(version.value) == rule
    if "/" not in value:  # an artifact name's '/' separates its segments
        with pytest.raises(InvalidIdentityError) as name:
            validate_name(value, field="f")
        assert str(name.value) == rule
    assert isinstance(version.value, InvalidNameError)


def test_a_segmented_name_takes_a_slash_but_never_a_backslash() -> None:
    assert (
        check_name("models/tiny@2026.11.30", field="f", max_length=MAX_LABEL, segments=True) == "models/tiny@2026.11.30"
    )
    with pytest.raises(InvalidNameError, match=r"contains a path separator '\\\\' \(U\+005C\) at position 6"):
        check_name("models\\tiny", field="f", max_length=MAX_LABEL, segments=True)


def test_a_job_name_made_from_user_values_obeys_the_rule() -> None:
    """What producers hand a backend (`sanitize_job_name` of an artifact's name and version)."""
    made = sanitize_job_name("models/Tiny Qwen3_v2-2026.11.30-coordinator-" + "x" * 40)
    assert job_name(made, field="f") == made and len(made) == MAX_JOB_NAME
