"""The fast lane (`pytest -m fast`) leaves out every test whose cost a marker or a fixture states.

tests/conftest.py gives `fast` to a test with none of the cost markers, the cost marker of a costly
fixture (`launcher`: a launch; `trl_env`: a real runtime) to every test that uses it, and `property`
to every Hypothesis search.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import COSTLY, pytest_collection_modifyitems

TESTS = Path(__file__).resolve().parent


@dataclass
class _Item:
    """What the hook reads of a collected test: its fixtures and markers."""

    fixturenames: tuple[str, ...] = ()
    markers: set[str] = field(default_factory=set)
    obj: object = None

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None

    def add_marker(self, marker: str) -> None:
        self.markers.add(marker)


def _lane(item: _Item) -> set[str]:
    pytest_collection_modifyitems(config=None, items=[item])  # type: ignore[arg-type]
    return item.markers


def test_a_test_without_a_cost_marker_is_fast() -> None:
    assert _lane(_Item(fixturenames=("tmp_path", "prefix"))) == {"fast"}


@pytest.mark.parametrize("marker", COSTLY)
def test_a_test_with_any_cost_marker_is_not_fast(marker: str) -> None:
    assert "fast" not in _lane(_Item(markers={marker}))


@pytest.mark.parametrize(("fixture", "marker"), [("launcher", "launch"), ("trl_env", "runtime")])
def test_a_costly_fixture_gives_its_tests_its_marker(fixture: str, marker: str) -> None:
    assert _lane(_Item(fixturenames=("tmp_path", fixture))) == {marker}


def test_a_hypothesis_search_is_a_property_test_not_a_fast_one() -> None:
    @given(st.integers())
    def search(n: int) -> None:
        pass

    def example() -> None:
        pass

    assert _lane(_Item(obj=search)) == {"property"}
    assert _lane(_Item(obj=example)) == {"fast"}


def test_every_module_under_tests_launch_is_marked_a_launch() -> None:
    for path in sorted((TESTS / "launch").glob("test_*.py")):
        marks = [
            ast.unparse(node.value)
            for node in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets)
        ]
        assert any("pytest.mark.launch" in m for m in marks), f"{path.name}: no pytestmark = pytest.mark.launch"
