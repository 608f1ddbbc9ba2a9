"""Placement is declared and validated once, by `RayPlacement` and `SlurmPlacement`, for the execution and the backend alike."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from rlaunch.placement import RAY_STRATEGIES, RayClusterFields, RayPlacement, SlurmPlacement, SlurmQueueFields
from rlaunch.skyrl.values.execution import RaySkyRLExecution, SlurmSkyRLExecution

SIZES = {"cpu": 1.0, "memory": "1GB", "disk": "1GB"}

REFUSED = [
    ({"address": "ray://head:10001"}, ValueError, "address='ray://head:10001' is a Ray Client address"),
    ({"strategy": "pack"}, ValueError, "strategy='pack': choose one of"),
    ({"excludes": ".git"}, TypeError, "excludes must be a tuple of strings"),
    ({"pip": ["ok", ""]}, TypeError, "pip must be a tuple of strings"),
    ({"check_capacity": "yes"}, TypeError, "check_capacity must be true or false"),
    ({"working_dir": ""}, TypeError, "working_dir must be a non-empty string or None"),
]


@pytest.mark.parametrize("fields,error,words", REFUSED)
def test_execution_and_placement_refuse_alike(fields, error, words) -> None:
    with pytest.raises(error, match=f"^RayPlacement.{words}".replace("(", r"\(").replace("[", r"\[")):
        RayPlacement(**fields)
    with pytest.raises(error, match=f"^RaySkyRLExecution.{words}".replace("(", r"\(").replace("[", r"\[")):
        RaySkyRLExecution(**SIZES, **fields)


def test_every_strategy_is_accepted_and_lists_become_tuples() -> None:
    for strategy in RAY_STRATEGIES:
        assert RayPlacement(strategy=strategy).strategy == strategy
    placement = RayPlacement(excludes=[".git"], pip=["rlaunch[ray]"])  # type: ignore[arg-type]
    assert placement.excludes == (".git",) and placement.pip == ("rlaunch[ray]",)


def test_execution_writes_the_placements_options() -> None:
    execution = RaySkyRLExecution(**SIZES, address="http://10.0.0.1:8265", strategy="PACK", priority="batch")
    expected = RayPlacement(
        address="http://10.0.0.1:8265",
        working_dir=execution.working_dir,
        excludes=execution.excludes,
        strategy="PACK",
        priority="batch",
    ).options()
    assert execution.placement() == expected


def _defaults(cls: type, names: set[str]) -> dict[str, object]:
    return {
        f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        for f in dataclasses.fields(cls)
        if f.name in names
    }


@pytest.mark.parametrize(
    ("declared", "placement", "execution", "differs"),
    [
        # an experiment uploads its project by default; a Ray backend built by hand uploads nothing
        (RayClusterFields, RayPlacement, RaySkyRLExecution, {"working_dir", "excludes"}),
        (SlurmQueueFields, SlurmPlacement, SlurmSkyRLExecution, set()),
    ],
)
def test_an_execution_takes_its_placements_fields_with_their_defaults(declared, placement, execution, differs) -> None:
    """An execution's placement fields are the placement's own declaration: the same names, types and
    defaults, but for the defaults it overrides on purpose (a restated field would drift)."""
    names = {f.name for f in dataclasses.fields(declared)}
    shared = {f.name: f.type for f in dataclasses.fields(execution) if f.name in names}
    assert shared == {f.name: f.type for f in dataclasses.fields(placement) if f.name in names}
    assert set(shared) == names
    ours, theirs = _defaults(execution, names), _defaults(placement, names)
    assert {name for name in names if ours[name] != theirs[name]} == differs


def test_the_execution_does_not_load_the_ray_backend() -> None:
    code = (
        "import sys; from rlaunch.skyrl.values.execution import RaySkyRLExecution as R; "
        "R(cpu=1.0, memory='1GB', disk='1GB', address='http://h:8265').placement(); "
        "print(sorted(m for m in sys.modules if m.startswith('rlaunch.cluster') or m == 'ray'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
