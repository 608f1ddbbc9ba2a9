"""The fast lane (`pytest -m fast`) leaves out every test whose cost a marker or a fixture states.

tests/conftest.py gives `fast` to a test with none of the cost markers, the cost marker of a costly
fixture (`launcher`: a launch; `trl_env`: a real runtime) to every test that uses it, and `property`
to every Hypothesis search.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import COSTLY, give_lane
from tests.scheduling import CLUSTER, FAST, MODULE, SPREAD_COSTLY, TIER_GROUPS, group_and_rank

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
def test_a_cluster_tier_is_one_unit_started_first_and_ray_and_the_gangs_share_it(marker: str) -> None:
    group = "ray" if marker in ("ray", "multinode") else marker
    assert group_and_rank(_Item(markers={marker, "property"})) == (group, CLUSTER)  # type: ignore[arg-type]


def test_the_observe_labs_readers_are_one_unit() -> None:
    assert group_and_rank(_Item(fixturenames=("prefix", "lab"), markers={"launch"})) == ("observe-lab", MODULE)  # type: ignore[arg-type]


@pytest.mark.parametrize(("marker", "rank"), [("fast", FAST), ("property", SPREAD_COSTLY), ("promises", SPREAD_COSTLY)])
def test_independent_tests_are_units_of_one(marker: str, rank: int) -> None:
    item = _Item(markers={marker})
    assert group_and_rank(item) == (item.nodeid, rank)  # type: ignore[arg-type]


def test_a_costly_module_is_one_unit() -> None:
    one, two = (_Item(markers={"launch"}, nodeid=f"tests/launch/test_smoke.py::test_{n}[x::y]") for n in (1, 2))
    other = _Item(markers={"launch"}, nodeid="tests/launch/test_smoke_more.py::test_1")
    assert group_and_rank(one) == group_and_rank(two) == ("tests/launch/test_smoke.py", MODULE)  # type: ignore[arg-type]
    assert group_and_rank(other)[0] == "tests/launch/test_smoke_more.py"  # type: ignore[arg-type]


def test_under_xdist_a_group_runs_whole_on_one_worker_and_first(tmp_path: Path) -> None:
    """The README's `-n N --dist loadgroup` with this suite's hooks, on a synthetic suite of a Ray and
    a Slurm tier, one launch module (a larger unit than either, of a later rank) and three independent
    tests, on two workers: each group's tests share a worker, and both tiers start before the module
    (xdist's own order, by size, would start the module first)."""
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(TESTS.parent)!r})\n"
        "from tests.conftest import (  # noqa: F401\n"
        "    pytest_collection_modifyitems, pytest_configure_node, pytest_unconfigure, pytest_xdist_make_scheduler,\n"
        ")\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    ray: r\n    slurm: s\n    launch: l\n    fast: f\n")
    (tmp_path / "test_suite.py").write_text(
        "import time, pytest\n"
        + "".join(f"def test_free_{n}(): time.sleep(0.2)\n" for n in range(3))
        + "".join(f"@pytest.mark.launch\ndef test_launch_{n}(): time.sleep(0.2)\n" for n in range(4))
        + "".join(f"@pytest.mark.ray\ndef test_ray_{n}(): time.sleep(0.2)\n" for n in range(3))
        + "".join(f"@pytest.mark.slurm\ndef test_slurm_{n}(): time.sleep(0.2)\n" for n in range(2))
    )
    before = set(Path(tempfile.gettempdir()).glob("rlaunch-test-groups-*"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    ran = re.findall(r"\[(gw\d)\] \[\s*\d+%\] PASSED test_suite.py::(test_\w+)", done.stdout)
    workers = {test: worker for worker, test in ran}
    assert len(workers) == 12, done.stdout
    for group, size in (("ray", 3), ("slurm", 2), ("launch", 4)):
        assert len({workers[f"test_{group}_{n}"] for n in range(size)}) == 1, (group, done.stdout)
    first = {worker: test for worker, test in reversed(ran)}  # each worker's first test
    assert sorted(first.values()) == ["test_ray_0", "test_slurm_0"], done.stdout
    assert set(Path(tempfile.gettempdir()).glob("rlaunch-test-groups-*")) <= before  # the maps are removed
