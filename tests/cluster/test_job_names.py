"""A job's name and labels obey the name rule (`rlaunch.names`) in the one value every backend is
handed, the `JobSpec`: a hostile name or label is refused at construction, naming the field, so no
backend (local, Ray, Iris, Slurm) can be asked to run it."""

from __future__ import annotations

import dataclasses

import pytest

from rlaunch.cluster.protocol import JobSpec
from rlaunch.names import MAX_JOB_NAME, MAX_LABEL, InvalidNameError

ARGV = ("python", "-c", "pass")
FIX = "remove it (names take no whitespace, control characters or path separators)"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("rl\trun", f"JobSpec.name='rl\\trun' contains whitespace '\\t' (U+0009) at position 2; {FIX}"),
        ("rl-run\n", f"JobSpec.name='rl-run\\n' contains whitespace '\\n' (U+000A) at position 6; {FIX}"),
        ("models/rl", f"JobSpec.name='models/rl' contains a path separator '/' (U+002F) at position 6; {FIX}"),
        (
            "rl\u202erun",
            f"JobSpec.name='rl\\u202erun' contains a control or invisible character '\\u202e' (U+202E) at position 2; {FIX}",
        ),
        ("a" * (MAX_JOB_NAME + 1), f"JobSpec.name={'a' * 40!r}... is 64 characters; at most 63"),
    ],
    ids=["tab", "trailing-newline", "slash", "bidi-override", "one-over"],
)
def test_a_hostile_job_name_is_refused_naming_the_field(name: str, message: str) -> None:
    with pytest.raises(InvalidNameError) as err:
        JobSpec(name=name, argv=ARGV)
    assert str(err.value) == message


def test_the_longest_job_name_is_kept_whole() -> None:
    """Before the rule a longer name was cut to 63 characters without a word; 63 is kept as it is."""
    longest = "a" * MAX_JOB_NAME
    assert JobSpec(name=longest, argv=ARGV).name == longest


def test_a_job_name_that_obeys_the_rule_is_made_scheduler_safe() -> None:
    assert JobSpec(name="My_Fancy.Job!!-v2", argv=ARGV).name == "my-fancy.job-v2"


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (
            {"rlaunch kind": "child"},
            f"JobSpec.labels key='rlaunch kind' contains whitespace ' ' (U+0020) at position 7; {FIX}",
        ),
        (
            {"rlaunch/kind": "child"},
            f"JobSpec.labels key='rlaunch/kind' contains a path separator '/' (U+002F) at position 7; {FIX}",
        ),
        (
            {"rlaunch.run": "rl/x-dev\n"},
            f"JobSpec.labels['rlaunch.run']='rl/x-dev\\n' contains whitespace '\\n' (U+000A) at position 8; {FIX}",
        ),
        (
            {"rlaunch.run": "rl\\x-dev"},
            f"JobSpec.labels['rlaunch.run']='rl\\\\x-dev' contains a path separator '\\\\' (U+005C) at position 2; {FIX}",
        ),
        ({"rlaunch.run": ""}, "JobSpec.labels['rlaunch.run'] must be a non-empty string; got ''"),
        ({"rlaunch.run": 7}, "JobSpec.labels['rlaunch.run'] must be a non-empty string; got 7"),
        (
            {"rlaunch.run": "r" * (MAX_LABEL + 1)},
            f"JobSpec.labels['rlaunch.run']={'r' * 40!r}... is 513 characters; at most 512",
        ),
    ],
    ids=[
        "key-space",
        "key-slash",
        "value-trailing-newline",
        "value-backslash",
        "value-empty",
        "value-not-text",
        "value-one-over",
    ],
)
def test_a_hostile_label_is_refused_naming_it(labels: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidNameError) as err:
        JobSpec(name="rl", argv=ARGV, labels=labels)  # type: ignore[arg-type]
    assert str(err.value) == message


def test_a_label_value_may_be_an_artifact_identity_of_the_longest_length() -> None:
    labels = {"rlaunch.artifact": "models/tiny-qwen3@2026.11.30", "rlaunch.run": "r" * MAX_LABEL}
    assert JobSpec(name="rl", argv=ARGV, labels=labels).labels == labels


def test_a_spec_derived_by_replace_is_judged_again() -> None:
    """The host's Ray driver spec is its gang's spec with fields replaced: the rule holds for it too."""
    gang = JobSpec(name="rl", argv=ARGV, labels={"rlaunch.kind": "child"})
    with pytest.raises(InvalidNameError, match=r"^JobSpec.name='rl\\trun'"):
        dataclasses.replace(gang, name="rl\trun")
    with pytest.raises(InvalidNameError, match=r"^JobSpec.labels\['rlaunch.gang'\]="):
        dataclasses.replace(gang, labels={**gang.labels, "rlaunch.gang": "in cluster"})
