"""The one parser of state files, unit by unit: what counts as damaged, and the fix each file's
role gets (a damaged file is never read as missing)."""

from __future__ import annotations

import pytest

from rlaunch.statefiles import CorruptStateError, fix_for, parse_json, parse_step_marker, require_object


def damaged(call, *args) -> CorruptStateError:  # noqa: ANN001 - any parser
    with pytest.raises(CorruptStateError) as caught:
        call(*args)
    return caught.value


def test_json_documents_parse_whatever_their_shape() -> None:
    assert parse_json(b'{"a": [1, 2]}', "/r/x.json") == {"a": [1, 2]}
    assert parse_json(b"[]", "/r/x.json") == []
    assert parse_json('{"é": "ü"}'.encode(), "/r/x.json") == {"é": "ü"}


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "empty file"),
        (b"  \n\t", "empty file"),
        (b'{"run_id": "a", "attempts": [', "not valid JSON: "),
        (b"\xff\xfe{}", "not UTF-8 text: invalid start byte at byte 0"),
        (b'{"a": 1}\x80', "not UTF-8 text: invalid start byte at byte 8"),
    ],
)
def test_what_does_not_parse_is_damaged_and_says_why(data: bytes, problem: str) -> None:
    error = damaged(parse_json, data, "/runs/x/run_record.json")
    assert error.source == "/runs/x/run_record.json" and error.problem.startswith(problem)
    assert str(error).startswith(f"/runs/x/run_record.json is damaged ({problem}")


def test_a_record_must_be_one_object_and_absent_stays_absent() -> None:
    assert require_object({"a": 1}, "/j/state.json") == {"a": 1}
    assert require_object(None, "/j/state.json") is None
    for value, kind in (([], "list"), ("x", "str"), (3, "int")):
        error = damaged(require_object, value, "/j/state.json")
        assert error.problem == f"holds a JSON {kind}, not an object" and error.source == "/j/state.json"


@pytest.mark.parametrize("text", ["7", "7\n", " 7 ", b"7\n"])
def test_a_step_marker_is_a_number(text: str | bytes) -> None:
    assert parse_step_marker(text, "/c/latest") == 7


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("", "''"),
        ("-1", "'-1'"),
        ("3.0", "'3.0'"),
        ("٣", "'٣'"),
        ("x" * 50, repr("x" * 40 + "…")),
        ("x" * 40, repr("x" * 40)),
        ("x" * 41, repr("x" * 40 + "…")),
    ],
)
def test_a_step_marker_that_is_not_a_step_number_is_damaged(text: str, shown: str) -> None:
    error = damaged(parse_step_marker, text, "/c/latest")
    assert error.problem == f"holds {shown}, not a step number"


def test_a_step_marker_that_is_not_text_is_damaged() -> None:
    assert damaged(parse_step_marker, b"\xff7", "/c/latest").problem == "not UTF-8 text"


@pytest.mark.parametrize(
    ("source", "fix"),
    [
        ("/p/a/1/run_record.json", "it is the run's attempt history: restore it from a copy, or move it aside "
         "(mv /p/a/1/run_record.json /p/a/1/run_record.json.corrupt); the next --run keeps"),
        ("/jobs/j1/job.json", "the local job's record is damaged: once none of its processes runs any more, "
         "remove its directory /jobs/j1 (rlaunch"),
        ("/jobs/j1/state.json", "the local job's state is damaged: once none of its processes runs any more, "
         "remove its directory /jobs/j1 (rlaunch"),
        ("/jobs/j1/supervisor.json", "remove the job's directory /jobs/j1 once it has ended"),
        ("/p/d/1/.status.json", "remove it and the .artifact.json beside it (/p/d/1) so the next --run"),
        ("/p/d/1/.artifact.json", "remove it and the .status.json beside it (/p/d/1) so the next --run"),
        ("/c/latest", "(a global_step_N directory in /c) into it, or remove it to start"),
        ("/c/latest_ckpt_global_step.txt", "(a global_step_N directory in /c) into it"),
        ("/p/other.json", "so it was changed outside rlaunch: restore it from a copy, or move it aside "
         "(mv /p/other.json /p/other.json.corrupt) and rerun"),
        ("other.json", "(mv other.json other.json.corrupt)"),
        ("/jobs/j1/state.json/", "remove its directory /jobs/j1 "),
        ("state.json", "remove its directory . (rlaunch"),
    ],
)  # fmt: skip
def test_each_file_gets_the_fix_for_its_role(source: str, fix: str) -> None:
    assert fix in fix_for(source)
    assert fix in str(CorruptStateError(source, "empty file"))
