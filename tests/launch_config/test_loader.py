"""The strict loader: no silent YAML surprises in a launch document (YAML 1.2 core scalars)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from rlaunch.launch_config import schema
from rlaunch.launch_config.loader import dump_yaml, load_yaml
from rlaunch.launch_config.typed import DocumentError
from tests.support.documents import rendered_document


@pytest.fixture
def text(prefix: str) -> str:
    # The loader's own dumper: PyYAML's would leave an attempt id such as 4844e8468650 unquoted,
    # which the YAML 1.2 loader reads as a number.
    return dump_yaml(rendered_document(prefix))


def refused(text: str) -> str:
    with pytest.raises(DocumentError) as info:
        schema.loads(text, source="launch.yaml")
    (problem,) = info.value.problems
    assert problem.startswith("launch.yaml")
    return problem


@pytest.mark.parametrize(
    ("yaml_text", "value"),
    [
        ("a: 1:30", "1:30"),  # YAML 1.1: 90
        ("a: yes", "yes"),  # YAML 1.1: True
        ("a: 2026-11-30", "2026-11-30"),  # YAML 1.1: a date
        ("a: 1e-3", 0.001),  # YAML 1.1: a string
        ("a: 0o17", 15),
        ("a: 0x1F", 31),
        ("a: '010'", "010"),
        ("a: ~", None),
    ],
)
def test_core_scalars(yaml_text: str, value: Any) -> None:
    assert load_yaml(yaml_text, source="x.yaml") == {"a": value}


@pytest.mark.parametrize(
    ("line", "written", "problem"),
    [
        ("seed: 17", "seed: 1:30", "run.seed: expected an integer, got '1:30'"),
        ("  seed: 17\n", "  seed: 17\n  seed: 18\n", "(run.seed): duplicate key 'seed'"),
    ],
    ids=["sexagesimal-is-not-a-number-in-a-typed-field", "a-duplicate-key"],
)
def test_yaml_the_document_cannot_mean_is_refused(text: str, line: str, written: str, problem: str) -> None:
    assert problem in refused(text.replace(line, written))


def test_an_octal_looking_integer_is_refused(text: str) -> None:
    problem = refused(text.replace("seed: 17", "seed: 010"))
    assert "(run.seed): 010 refused" in problem and "write 10, or quote it" in problem


@pytest.mark.parametrize("value", [".nan", ".inf", "-.Inf", "1e400"])
def test_nan_and_infinity_are_refused(text: str, value: str) -> None:
    problem = refused(text.replace("cpu: 96.0", f"cpu: {value}"))
    assert "(cluster.allocation.cpu)" in problem and "finite" in problem


def test_nan_is_refused_in_data_too(prefix: str) -> None:
    document = rendered_document(prefix)
    document["cluster"]["allocation"]["cpu"] = float("nan")
    with pytest.raises(DocumentError, match="cluster.allocation.cpu: nan is not a finite number"):
        schema.from_dict(document)
    document = rendered_document(prefix)
    document["skyrl"]["trainer"]["max_prompt_length"] = float("inf")
    with pytest.raises(DocumentError, match="skyrl.trainer.max_prompt_length: inf is not a finite number"):
        schema.from_dict(document)


@pytest.mark.parametrize("size", ['"0"', "0GB", "0.0TB"])
def test_a_zero_size_is_refused(text: str, size: str) -> None:
    problem = refused(text.replace("memory: 1600GB", f"memory: {size}"))
    assert "cluster.allocation.memory" in problem and "must be positive" in problem


def test_an_absurdly_long_integer_is_refused(text: str) -> None:
    problem = refused(text.replace("seed: 17", "seed: " + "1" * 5000))
    assert "(run.seed): an integer of 5000 digits refused" in problem


@pytest.mark.parametrize(
    "text",
    [
        "413257706e23",
        "1e5",
        "1e-3",
        "010",
        "0x1F",
        "0o17",
        "1_000",
        "+1",
        "-2.5",
        ".inf",
        "yes",
        "1:30",
        "~",
        "null",
        "True",
        "2026-11-30",
    ],
)
def test_a_string_that_looks_like_a_scalar_is_written_quoted_and_reads_back_a_string(text: str) -> None:
    """An attempt id such as 413257706e23 is a float to YAML 1.2 and a string to YAML 1.1: the
    dumper quotes it so both readers (the strict loader and the adapters' safe_load) get the string."""
    written = dump_yaml({"run": {"attempt_id": text}})
    assert load_yaml(written, source="doc.yaml") == {"run": {"attempt_id": text}}
    assert yaml.safe_load(written) == {"run": {"attempt_id": text}}


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.text(alphabet="0123456789abcdefxo+-._:eE", min_size=1, max_size=14))
def test_every_short_string_round_trips_through_dump_and_both_readers(text: str) -> None:
    written = dump_yaml({"value": text})
    assert load_yaml(written, source="doc.yaml") == {"value": text}
    assert yaml.safe_load(written) == {"value": text}
