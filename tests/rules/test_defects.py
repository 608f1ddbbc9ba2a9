"""Known upstream defects: which ones a plan triggers, how each reads, and which the preflight refuses.

A defect's status comes from the runtime's whole lock (fsdp pins every package: skyrl 0.4.0,
vllm 0.30.0, flash-attn 2.8.3, PyYAML 6.0.4, ...); its trigger is a predicate over the plan's
geometry and composed recipe. Only an open defect that the plan triggers is a violation
(`defect.open`, with the fix); one naming a package the lock does not hold is `unverified`.
"""

from __future__ import annotations

import dataclasses

import pytest

from rlaunch.launch_config.geometry import Geometry
from rlaunch.rules.defect_triggers import defect_rules, findings
from rlaunch.runtimes.defects import FIXED, OPEN, UNVERIFIED, WORKED_AROUND, KnownDefect
from tests.support.specs import recipe

from .helpers import FSDP, SEED, Case, rendered, seed, verdict

TAIL = seed(train_batch_size=258, policy_mini_batch_size=2, micro_train_batch_size_per_gpu=1)  # stride 4
STEP_WISE = recipe(generator={"step_wise_trajectories": True})


def runtime(*defects: KnownDefect):
    return dataclasses.replace(FSDP, name="fsdp-defects", known_defects=defects)


def found(case: Case, *defects: KnownDefect) -> dict[str, tuple[str, bool, str]]:
    prof = runtime(*defects)
    composed = prof.compose(rendered(dataclasses.replace(case, profile=prof)))[0]
    return {f.defect.id: (f.status, f.triggered, f.line()) for f in findings(prof, composed)}


def test_each_finding_reads_its_status_fix_and_whether_the_plan_triggers_it() -> None:
    defects = (
        KnownDefect("A#1", "skyrl", "s", trigger="tail_stride"),
        KnownDefect("B#2", "skyrl", "s", fixed_in="0.4.0", trigger="step_wise_trajectories"),
        KnownDefect("C#3", "skyrl", "s", fixed_in="0.5.0", workaround="batch.tail_stride", trigger="tail_stride"),
        KnownDefect("D#4", "flash-attn", "s"),
        KnownDefect("U#6", "not-in-the-lock", "s"),
    )
    assert found(SEED, *defects) == {
        "A#1": (OPEN, False, "A#1 (skyrl): open; not triggered by this plan"),
        "B#2": (FIXED, False, "B#2 (skyrl, fixed in skyrl 0.4.0): fixed; not triggered by this plan"),
        "C#3": (
            WORKED_AROUND,
            False,
            "C#3 (skyrl, fixed in skyrl 0.5.0): worked around by rule batch.tail_stride; not triggered by this plan",
        ),
        "D#4": (OPEN, True, "D#4 (flash-attn): open; this plan triggers it"),  # no trigger: every plan
        "U#6": (UNVERIFIED, True, "U#6 (not-in-the-lock): unverified; this plan triggers it"),
    }
    fixed_by_rule = KnownDefect("E#5", "pyyaml", "s", fixed_in="6.0", workaround="batch.tail_stride")
    assert found(SEED, fixed_by_rule)["E#5"][2] == "E#5 (pyyaml, fixed in pyyaml 6.0): fixed; this plan triggers it"
    triggered = found(TAIL, *defects)
    assert [triggered[i][1] for i in ("A#1", "B#2", "C#3", "D#4")] == [True, False, True, True]
    assert triggered["A#1"][2] == "A#1 (skyrl): open; this plan triggers it"


def test_step_wise_trajectories_trigger_their_defect() -> None:
    defect = KnownDefect("B#2", "skyrl", "s", trigger="step_wise_trajectories")
    assert found(seed(STEP_WISE), defect)["B#2"][:2] == (OPEN, True)
    assert found(seed(recipe(generator={"step_wise_trajectories": False})), defect)["B#2"][:2] == (OPEN, False)


def test_a_trigger_rlaunch_does_not_know_is_refused_by_name() -> None:
    prof = runtime(KnownDefect("X#9", "skyrl", "s", trigger="full_moon"))
    composed = FSDP.compose(rendered(SEED))[0]
    with pytest.raises(ValueError) as refused:
        findings(prof, composed)
    assert str(refused.value) == (
        "runtime 'fsdp-defects': known defect X#9 names trigger 'full_moon', which rlaunch does not know; "
        "use one of ['step_wise_trajectories', 'tail_stride'] or none"
    )


def test_only_an_open_defect_the_plan_triggers_is_refused() -> None:
    def codes(case: Case, *defects: KnownDefect) -> list[tuple[str, dict]]:
        prof = runtime(*defects)
        return [
            (v.fields[0], dict(v.values))
            for v in verdict(dataclasses.replace(case, profile=prof))
            if v.code == "defect.open"
        ]

    open_tail = KnownDefect("A#1", "skyrl", "tail batches crash", trigger="tail_stride")
    assert codes(SEED, open_tail) == []
    assert codes(TAIL, open_tail) == [
        ("runtime.known_defects.A#1", {"defect": "A#1", "package": "skyrl", "pinned": "0.4.0"})
    ]
    unpinned = KnownDefect("D#4", "not-in-the-lock", "s")
    worked_around = KnownDefect("C#3", "skyrl", "s", workaround="batch.tail_stride", trigger="tail_stride")
    fixed = KnownDefect("B#2", "skyrl", "s", fixed_in="0.4.0")
    assert codes(TAIL, unpinned, worked_around, fixed) == []
    assert [c[0] for c in codes(TAIL, unpinned, worked_around, open_tail, fixed)] == ["runtime.known_defects.A#1"]
    open_step_wise = KnownDefect("S#5", "skyrl", "steps crash", trigger="step_wise_trajectories")
    assert codes(SEED, open_step_wise) == []
    assert [c[0] for c in codes(seed(STEP_WISE), open_step_wise)] == ["runtime.known_defects.S#5"]
    open_yaml = KnownDefect("Y#7", "PyYAML", "anchors loop", fixed_in="7.0")
    assert codes(SEED, open_yaml) == [
        ("runtime.known_defects.Y#7", {"defect": "Y#7", "package": "PyYAML", "pinned": "6.0.4"})
    ]
    open_vllm = KnownDefect("V#8", "vllm", "weight sync OOM", fixed_in="0.31.0rc1")  # a fix after the locked 0.30.0
    (refused,) = [v for v in verdict(dataclasses.replace(SEED, profile=runtime(open_vllm))) if v.code == "defect.open"]
    assert refused.values == {"defect": "V#8", "package": "vllm", "pinned": "0.30.0"}
    assert "repin the runtime to vllm>=0.31.0rc1, which has the fix" in refused.fix


def test_the_step_wise_trigger_reads_a_recipe_that_leaves_the_key_out_as_off() -> None:
    prof = runtime(KnownDefect("B#2", "skyrl", "s", trigger="step_wise_trajectories"))
    geo = Geometry.from_recipe(FSDP.compose(rendered(SEED))[0])
    assert [f.triggered for f in findings(prof, {"generator": {}}, geo)] == [False]
    assert [f.triggered for f in findings(prof, {"generator": {"step_wise_trajectories": True}}, geo)] == [True]


def test_the_defect_rules_judge_the_recipe_and_the_geometry_they_are_given() -> None:
    """The plan's one geometry (the fit search judges changed ones), not one derived again."""
    prof = runtime(
        KnownDefect("A#1", "skyrl", "tail batches crash", trigger="tail_stride"),
        KnownDefect("B#2", "skyrl", "steps crash", trigger="step_wise_trajectories"),
    )
    seed_recipe = prof.compose(rendered(dataclasses.replace(SEED, profile=prof)))[0]
    tail_geometry = Geometry.from_recipe(prof.compose(rendered(dataclasses.replace(TAIL, profile=prof)))[0])
    assert [v.values["defect"] for v in defect_rules(prof, seed_recipe, tail_geometry)] == ["A#1"]
    step_wise = prof.compose(rendered(dataclasses.replace(seed(STEP_WISE), profile=prof)))[0]
    (v,) = defect_rules(prof, step_wise, Geometry.from_recipe(seed_recipe))
    assert v.values == {"defect": "B#2", "package": "skyrl", "pinned": "0.4.0"}
    assert v.message == (
        "runtime 'fsdp-defects' pins skyrl 0.4.0, which has the open upstream defect B#2, and this plan triggers "
        "it: steps crash"
    )
