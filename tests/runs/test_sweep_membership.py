"""A run's sweep membership: the contract every variant's run record carries at its top level."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlaunch.runs import run_record
from rlaunch.runs.sweep import RECORD_KEY, Axis, Grid, SweepMembership, of_record, sweep_name

MEMBER = SweepMembership("smoke-rl@2026.12.07~sweep-1a2b3c4d", "lr-2e-3", {"trainer.policy.optimizer_config.lr": 2e-3})

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8))


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(min_size=1, max_size=20), scalars, max_size=4))
def test_a_membership_survives_its_dict_form(settings: dict[str, Any]) -> None:
    member = SweepMembership("s@1~sweep-0", "v", settings)
    assert SweepMembership.from_dict(member.to_dict()) == member
    assert member.to_dict() == {"name": "s@1~sweep-0", "variant": "v", "settings": settings}


def test_the_record_keeps_it_at_its_top_level_beside_the_attempts(tmp_path: Path) -> None:
    out = str(tmp_path)
    run_record.update_attempt(out, "rl", "a1", {"state": "running"})
    run_record.keep_field(out, "rl", RECORD_KEY, MEMBER.to_dict())
    record = run_record.read(out)
    assert record is not None
    assert record["sweep"] == {
        "name": "smoke-rl@2026.12.07~sweep-1a2b3c4d",
        "variant": "lr-2e-3",
        "settings": {"trainer.policy.optimizer_config.lr": 2e-3},
    }
    assert [a["attempt_id"] for a in record["attempts"]] == ["a1"]
    assert of_record(record) == MEMBER


def test_a_record_without_a_sweep_belongs_to_none() -> None:
    assert of_record({"attempts": []}) is None
    assert of_record(None) is None


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"name": "s", "variant": "v"}, "sweep lacks settings"),
        ({"name": "s", "variant": "v", "settings": {}, "grid": 1}, "unknown fields grid"),
        ({"name": "s x", "variant": "v", "settings": {}}, "sweep.name='s x' contains"),
        ({"name": "s", "variant": "", "settings": {}}, "sweep.variant must be a non-empty string"),
        ({"name": "s", "variant": "v", "settings": [1]}, "sweep.settings must map"),
        ("s", "sweep must be an object"),
    ],
)
def test_a_damaged_membership_is_refused_naming_the_field(value: Any, says: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        SweepMembership.from_dict(value)
    assert says in str(caught.value)


LR = "trainer.policy.optimizer_config.lr"
KL = "trainer.algorithm.kl_loss_coef"


def test_a_grid_labels_each_combination_by_the_text_given_in_order() -> None:
    grid = Grid((Axis(LR, (("1e-3", 1e-3), ("2e-3", 2e-3))), Axis(KL, (("0", 0), ("0.1", 0.1)))))
    variants = grid.variants("s")
    assert [v.variant for v in variants] == [
        "lr-1e-3.kl_loss_coef-0",
        "lr-1e-3.kl_loss_coef-0.1",
        "lr-2e-3.kl_loss_coef-0",
        "lr-2e-3.kl_loss_coef-0.1",
    ]
    assert variants[2].settings == {LR: 2e-3, KL: 0}


def test_a_label_holds_only_what_a_name_may() -> None:
    grid = Grid((Axis("trainer.project_name", (("a/b c", "a/b c"), ("-1", -1))),))
    assert [v.variant for v in grid.variants("s")] == ["project_name-a_b_c", "project_name--1"]


def test_the_name_is_the_terminal_its_version_and_the_grids_digest() -> None:
    grid = Grid((Axis(LR, (("1e-3", 1e-3), ("2e-3", 2e-3))),))
    reordered = Grid((Axis(LR, (("2e-3", 2e-3), ("1e-3", 1e-3))),))
    name = sweep_name("smoke/rl", "2026.12.07", grid)
    assert name == f"smoke/rl@2026.12.07~sweep-{grid.digest()}" and len(grid.digest()) == 8
    assert grid.digest() != reordered.digest()
    SweepMembership(name, "lr-1e-3")  # a name the record and the coordinator's label both take


@pytest.mark.parametrize(
    ("axes", "says"),
    [
        ((Axis(LR, (("1e-3", 1e-3),)),), "needs at least two distinct values"),
        ((Axis(LR, (("1e-3", 1e-3), ("1e-3", 1e-3))),), "needs at least two distinct values"),
        ((Axis(LR, (("1", 1), ("2", 2))), Axis(LR, (("3", 3), ("4", 4)))), f"{LR} is swept twice"),
        ((Axis("a.b", (("x y", "x y"), ("x?y", "x?y"))),), "two variants would both be labelled 'b-x_y'"),
    ],
)
def test_a_grid_that_cannot_name_its_variants_apart_is_refused(axes: tuple[Axis, ...], says: str) -> None:
    with pytest.raises(ValueError) as caught:
        Grid(axes)
    assert says in str(caught.value)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(min_size=1, max_size=12), min_size=2, max_size=4, unique=True))
def test_any_grid_either_is_refused_or_names_every_variant_apart_as_an_artifact(texts: list[str]) -> None:
    from rlaunch.artifacts.identity import validate_name

    try:
        grid = Grid((Axis("trainer.project_name", tuple((t, t) for t in texts)),))
    except ValueError as exc:
        assert "would both be labelled" in str(exc)
        return
    labels = [v.variant for v in grid.variants("s")]
    assert len(set(labels)) == len(texts)
    for label in labels:
        assert validate_name(f"smoke/rl.{label}") == f"smoke/rl.{label}"
