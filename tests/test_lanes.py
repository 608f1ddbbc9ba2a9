"""The fast lane (`pytest -m fast`) leaves out every test whose cost a marker or a fixture states.

tests/conftest.py gives `fast` to a test with none of the cost markers, the cost marker of a costly
fixture (`launcher`: a launch; `trl_env`: a real runtime) to every test that uses it, and `property`
to every Hypothesis search.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import COSTLY, TIER_GROUPS, give_lane, xdist_group

TESTS = Path(__file__).resolve().parent


@dataclass
class _Item:
    """What the hook reads of a collected test: its fixtures and markers."""

    fixturenames: tuple[str, ...] = ()
    markers: set[str] = field(default_factory=set)
    obj: object = None
    nodeid: str = "tests/launch/test_smoke.py::test_one[a]"

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None

    def add_marker(self, marker: str) -> None:
        self.markers.add(marker)


def _lane(item: _Item) -> set[str]:
    give_lane(item)  # type: ignore[arg-type]
    return item.markers


def test_a_test_without_a_cost_marker_is_fast() -> None:
    assert _lane(_Item(fixturenames=("tmp_path", "prefix"))) == {"fast"}


@pytest.mark.parametrize("marker", COSTLY)
def test_a_test_with_any_cost_marker_is_not_fast(marker: str) -> None:
    assert "fast" not in _lane(_Item(markers={marker}))


def test_every_declared_marker_but_fast_is_a_cost_marker() -> None:
    """A marker declared in pyproject.toml but missing from COSTLY would leave its tests in the fast lane."""
    declared = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert {line.partition(":")[0] for line in declared} - {"fast"} == set(COSTLY)


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


@pytest.mark.parametrize("marker", sorted(TIER_GROUPS))
def test_a_cluster_tier_runs_on_one_worker_and_ray_and_the_gangs_share_it(marker: str) -> None:
    group = xdist_group(_Item(markers={marker, "property"}))  # type: ignore[arg-type]
    assert group == ("ray" if marker in ("ray", "multinode") else marker)


def test_the_observe_labs_readers_share_one_worker() -> None:
    assert xdist_group(_Item(fixturenames=("prefix", "lab"), markers={"launch"})) == "observe-lab"  # type: ignore[arg-type]


@pytest.mark.parametrize("marker", ["fast", "property", "promises"])
def test_independent_tests_are_spread_one_by_one(marker: str) -> None:
    assert xdist_group(_Item(markers={marker})) is None  # type: ignore[arg-type]


def test_a_costly_module_keeps_its_tests_on_one_worker() -> None:
    one, two = (_Item(markers={"launch"}, nodeid=f"tests/launch/test_smoke.py::test_{n}[x::y]") for n in (1, 2))
    other = _Item(markers={"launch"}, nodeid="tests/launch/test_smoke_more.py::test_1")
    assert xdist_group(one) == xdist_group(two) == "tests/launch/test_smoke.py"  # type: ignore[arg-type]
    assert xdist_group(other) != xdist_group(one)  # type: ignore[arg-type]
