"""Every module that keeps a promise (`tests/promises.py`) is a mutation area of
`benchmarks/mutation.py`, and its holder is among the area's mutants: a guard whose module no area
mutates has no measure of how well its edges are tested."""

from __future__ import annotations

import fnmatch

from tests.promises import PROMISES
from tests.support import file_modules


def _areas() -> tuple:
    return file_modules.load("benchmarks/mutation.py", "rlaunch_mutation_areas").AREAS


def _relocated(path: str, relocate: tuple[str, ...]) -> str:
    """Where an area's scratch copy has `path`: an adapter package moved to the top of src/."""
    for package in relocate:
        if path.startswith(package + "/"):
            return f"src/{package.rpartition('/')[2]}{path.removeprefix(package)}"
    return path


def _mutant(path: str, where: str) -> str:
    """The name mutmut gives the first mutant of holder `where` of the (scratch copy's) `path`: a
    method is `xǁClassǁmethod`, a function `x_function`, with what is nested in it."""
    module = path.removeprefix("src/").removesuffix(".py").replace("/", ".")
    outer, _, inner = where.partition(".")
    name = f"xǁ{outer}ǁ{inner}" if inner and outer[0].isupper() else f"x_{outer}"
    return f"{module}.{name}__mutmut_1"


def test_every_promise_holder_is_mutated_by_an_area() -> None:
    areas = _areas()
    unmeasured = []
    for promise in PROMISES:
        for guard in promise.guards:
            if not guard.path.endswith(".py") or not guard.where or guard.where.isupper():
                continue  # a non-Python file, or a module-level constant (mutmut leaves those alone)
            found = [
                area
                for area in areas
                if any(fnmatch.fnmatch(path := _relocated(guard.path, area.relocate), glob) for glob in area.mutate)
                and (not area.only or any(fnmatch.fnmatch(_mutant(path, guard.where), o) for o in area.only))
            ]
            if not found:
                unmeasured.append(f"{guard.path}::{guard.where}")
    assert not unmeasured, f"promise holders no mutation area mutates: {sorted(set(unmeasured))}"
