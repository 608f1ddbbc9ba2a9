"""Path confinement, function by function: which relative paths and locations a document may
name (the exact reason for each refusal), and that deleting checks real paths against the root
by whole path components, never by a string prefix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rlaunch.paths import ConfinementError, inside, join_inside, location_problem, relative_path_problem, remove_inside


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (None, "must be a non-empty relative path"),
        ("", "must be a non-empty relative path"),
        (3, "must be a non-empty relative path"),
        ("a\x00b", "contains a NUL or a backslash; write a plain relative path with '/'"),
        ("a\\b", "contains a NUL or a backslash; write a plain relative path with '/'"),
        ("s3://b/x", "has a URL scheme; write a path relative to the staging root"),
        ("models/s3://x", "has a URL scheme; write a path relative to the staging root"),
        ("c:x", "has a URL scheme; write a path relative to the staging root"),
        ("/etc", "is absolute; write a path relative to the staging root"),
        ("~/x", "is absolute; write a path relative to the staging root"),
        ("a/../b", "contains '..'; it would leave the staging root"),
        ("..", "contains '..'; it would leave the staging root"),
        ("a//b", "is not normalised; write 'a/b'"),
        ("a/./b", "is not normalised; write 'a/b'"),
        ("a/", "is not normalised; write 'a'"),
        (".", "names the root itself"),
        ("./", "names the root itself"),
    ],
)
def test_relative_path_problems(value: object, problem: str) -> None:
    assert relative_path_problem(value) == problem


def test_relative_path_problems_name_the_given_root() -> None:
    assert relative_path_problem("/x", root="the task") == "is absolute; write a path relative to the task"
    for fine in ("a", "a/b.c", "..a/b", "a/..b", "x-1/y_2"):
        assert relative_path_problem(fine) is None, fine


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (None, "must be an absolute path or a URL"),
        ("", "must be an absolute path or a URL"),
        ("/a\x00", "contains a NUL"),
        ("exports", "is relative, so it would land wherever the process happens to run; write an absolute path or a URL"),
        ("/data/../etc", "contains '..'; write the location it means"),
        ("gs://b/../c", "contains '..'; write the location it means"),
        ("gs://a://b/../c", "contains '..'; write the location it means"),
        ("gs://b/../c://d", "contains '..'; write the location it means"),
    ],
)  # fmt: skip
def test_location_problems(value: object, problem: str) -> None:
    assert location_problem(value) == problem


def test_absolute_paths_and_urls_are_locations() -> None:
    for fine in ("/data/x", "gs://bucket/x", "s3://b", "memory://x/..y", "/a/..b"):
        assert location_problem(fine) is None, fine


def test_inside_compares_whole_components_not_a_string_prefix(tmp_path: Path) -> None:
    root = tmp_path / "task"
    (root / "models").mkdir(parents=True)
    (tmp_path / "task-evil").mkdir()
    assert inside(str(root), str(root / "models")) == str((root / "models").resolve())
    with pytest.raises(ConfinementError) as refused:
        inside(str(root), str(tmp_path / "task-evil"))
    assert str(refused.value) == (
        f"{tmp_path / 'task-evil'} resolves to {(tmp_path / 'task-evil').resolve()}, outside {root.resolve()}; "
        "refusing to touch it (the document names a path that leaves its root)"
    )
    with pytest.raises(ConfinementError, match="is the root itself; refusing to touch it"):
        inside(str(root), str(root) + "/")


def test_a_link_itself_may_go_but_not_what_it_leads_to(tmp_path: Path) -> None:
    root, outside = tmp_path / "task", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    (root / "link").symlink_to(outside)
    assert inside(str(root), str(root / "link"), follow_last=False) == str(root.resolve() / "link")
    with pytest.raises(ConfinementError, match="outside"):
        inside(str(root), str(root / "link"))
    remove_inside(str(root), str(root / "link"))
    assert not os.path.lexists(root / "link") and (outside / "keep.txt").exists()


def test_remove_inside_removes_a_tree_and_ignores_what_is_absent(tmp_path: Path) -> None:
    root = tmp_path / "task"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f").write_text("x")
    remove_inside(str(root), str(root / "missing"))
    remove_inside(str(root), str(root / "a"))
    assert root.exists() and not (root / "a").exists()
    with pytest.raises(ConfinementError):
        remove_inside(str(root), str(root))


def test_join_inside_names_the_field(tmp_path: Path) -> None:
    root = tmp_path / "task"
    root.mkdir()
    assert join_inside(str(root), "models/m", field="inputs.model.local_path") == str(root.resolve() / "models/m")
    with pytest.raises(ConfinementError) as refused:
        join_inside(str(root), "../x", field="inputs.model.local_path")
    assert str(refused.value) == "inputs.model.local_path='../x' contains '..'; it would leave the staging root"
