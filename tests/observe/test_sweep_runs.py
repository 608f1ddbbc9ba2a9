"""`rlaunch runs` lists a sweep's variants together under the sweep's name: one line for the sweep
(its variants and their states), each variant indented with its label and settings; a run of no
sweep as before; a `sweep` field that is not a membership is told and the run listed alone.

The runs are laid out by hand the way a launch records them (tests/observe/sweep_records.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st

from rlaunch.cli.admin import main
from rlaunch.observe.sweeps import MalformedSweepError, SweepGroup, grouped, sweep_of
from rlaunch.runs import run_record
from rlaunch.runs.sweep import SweepMembership
from tests.observe.sweep_records import LR, VERSION, join_sweep, rl_run, variant

HEADER = ["ARTIFACT", "STATE", "ATTEMPT", "SUBMITTED", "COORDINATOR", "CHILD"]


def rlaunch(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def at(minute: int) -> str:
    return f"2026-12-01T10:{minute:02d}:00+00:00"


def test_a_sweeps_three_variants_one_failed_are_listed_under_the_sweep(prefix: str, document: dict[str, Any]) -> None:
    rl_run(document, "plain/rl", submitted_at=at(1))
    for minute, (label, lr, state) in enumerate(
        [("lr-a", 1e-6, "succeeded"), ("lr-c", 3e-6, "failed"), ("lr-b", 2e-6, "succeeded")]
    ):
        variant(document, "lr-sweep", label, lr, state=state, submitted_at=at(10 + minute))
    rl_run(document, "later/rl", submitted_at=at(30))

    done = rlaunch("runs")
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert lines[0].split() == [*HEADER, "VARIANT"]
    # newest first: the sweep stands where its newest variant would, its variants in label order
    assert lines[1].startswith(f"later/rl@{VERSION} ")
    assert lines[2] == "sweep lr-sweep  3 variants: 2 succeeded, 1 failed"
    variants = [line.split() for line in lines[3:6]]
    assert [(v[0], v[1], v[-2], v[-1]) for v in variants] == [
        (f"sweeps/rl-lr-a@{VERSION}", "succeeded", "lr-a", f"{LR}=1e-06"),
        (f"sweeps/rl-lr-b@{VERSION}", "succeeded", "lr-b", f"{LR}=2e-06"),
        (f"sweeps/rl-lr-c@{VERSION}", "failed", "lr-c", f"{LR}=3e-06"),
    ]
    assert all(line.startswith("  sweeps/") for line in lines[3:6])
    assert lines[6].startswith(f"plain/rl@{VERSION} ") and len(lines) == 7
    assert lines[6].split()[-1] == "-"  # a run of no sweep: no variant, the child column ends its line


def test_two_sweeps_each_under_its_own_name_and_the_filter_takes_the_whole_name(
    prefix: str, document: dict[str, Any]
) -> None:
    variant(document, "lr", "a", 1e-6, submitted_at=at(1))
    variant(document, "lr-2", "b", 2e-6, submitted_at=at(2), state="cancelled")
    variant(document, "lr", "c", 3e-6, submitted_at=at(3))
    rl_run(document, "plain/rl", submitted_at=at(4))

    lines = rlaunch("runs").stdout.splitlines()
    assert [line for line in lines if line.startswith("sweep ")] == [
        "sweep lr  2 variants: 2 succeeded",
        "sweep lr-2  1 variant: 1 cancelled",
    ]
    assert lines.index("sweep lr-2  1 variant: 1 cancelled") == lines.index("sweep lr  2 variants: 2 succeeded") + 3

    only = rlaunch("runs", "--sweep", "lr").stdout.splitlines()
    assert only[1:] == [
        "sweep lr  2 variants: 2 succeeded",
        *[line for line in lines if "sweeps/rl-a@" in line or "sweeps/rl-c@" in line],
    ]
    listed = json.loads(rlaunch("runs", "--sweep", "lr-2", "--json").stdout)
    assert [(r["artifact"], r["sweep"]) for r in listed] == [
        (f"sweeps/rl-b@{VERSION}", {"name": "lr-2", "variant": "b", "settings": {LR: 2e-6}})
    ]
    assert rlaunch("runs", "--sweep", "l").stdout == f"no runs of sweep l under {prefix}\n"


def test_without_any_sweep_the_list_is_as_before(prefix: str, document: dict[str, Any]) -> None:
    rl_run(document, "plain/rl")
    done = rlaunch("runs")
    assert done.exit_code == 0 and done.stderr == ""
    header, row = done.stdout.splitlines()
    assert header.split() == HEADER and row.startswith(f"plain/rl@{VERSION}  succeeded  a1 (1)")
    assert json.loads(rlaunch("runs", "--json").stdout)[0]["sweep"] is None


@pytest.mark.parametrize(
    ("value", "told"),
    [
        ("lr-sweep", "sweep must be an object with name, variant and settings, got 'lr-sweep'"),
        ({"name": "lr-sweep", "settings": {}}, "sweep lacks variant: {'name': 'lr-sweep', 'settings': {}}"),
        ({"name": "lr sweep", "variant": "a", "settings": {}}, "sweep.name='lr sweep' contains whitespace"),
        (
            {"name": "lr-sweep", "variant": "a", "settings": [LR]},
            f"sweep.settings must map dotted recipe keys to values, got ['{LR}']",
        ),
        ({"name": "lr-sweep", "variant": "a", "settings": {"": 1}}, "sweep.settings must map dotted recipe keys"),
    ],
    ids=["not-an-object", "no-variant", "name-with-a-space", "settings-a-list", "an-empty-key"],
)
def test_a_malformed_sweep_field_is_told_and_the_run_listed_alone(
    prefix: str, document: dict[str, Any], value: Any, told: str
) -> None:
    broken = rl_run(document, "sweeps/rl-broken", submitted_at=at(1))
    join_sweep(broken, value)
    variant(document, "lr-sweep", "a", 1e-6, submitted_at=at(2))

    done = rlaunch("runs")
    assert done.exit_code == 0
    lines = done.stdout.splitlines()
    assert lines[1:3] == ["sweep lr-sweep  1 variant: 1 succeeded", lines[2]] and lines[2].startswith("  sweeps/rl-a@")
    assert lines[3].startswith(f"sweeps/rl-broken@{VERSION} ")  # listed alone, not indented
    (warning,) = done.stderr.splitlines()
    assert warning.startswith(f"warning: {broken / 'run_record.json'}: ") and told in warning
    assert warning.endswith("relaunch the variant, or remove the field to list the run alone")
    assert json.loads(rlaunch("runs", "--json").stdout)[1]["sweep_problem"] == warning.removeprefix("warning: ")


def test_a_record_without_the_field_is_no_sweeps_and_an_empty_settings_is_shown_as_none() -> None:
    assert sweep_of({"attempts": []}, "r") is None and sweep_of(None, "r") is None
    member = sweep_of({"attempts": [], "sweep": {"name": "s", "variant": "v", "settings": {}}}, "r")
    assert member == SweepMembership("s", "v", {})
    with pytest.raises(
        MalformedSweepError, match=r"^r: sweep must be an object with name, variant and settings, got \[\]"
    ):
        sweep_of({"sweep": []}, "r")


rows = st.lists(
    st.tuples(st.sampled_from(["s1", "s2", None]), st.sampled_from(["a", "b", "c"]), st.sampled_from(["ok", "failed"])),
    max_size=12,
).map(
    lambda found: [
        {
            "output_path": f"/p/{i}",
            "state": state,
            "sweep": {"name": name, "variant": label, "settings": {}} if name else None,
        }
        for i, (name, label, state) in enumerate(found)
    ]
)


@given(rows)
def test_grouping_keeps_every_row_once_and_each_sweep_in_one_group(found: list[dict[str, Any]]) -> None:
    shown = grouped(found)
    flat = [r for item in shown for r in (item.rows if isinstance(item, SweepGroup) else (item,))]
    assert sorted(r["output_path"] for r in flat) == sorted(r["output_path"] for r in found)
    groups = [item for item in shown if isinstance(item, SweepGroup)]
    assert len({g.name for g in groups}) == len(groups)
    for g in groups:
        assert {r["sweep"]["name"] for r in g.rows} == {g.name}
        assert [r["sweep"]["variant"] for r in g.rows] == sorted(r["sweep"]["variant"] for r in g.rows)
        first = next(i for i, r in enumerate(found) if r["sweep"] and r["sweep"]["name"] == g.name)
        before = [item for item in shown[: shown.index(g)] if not isinstance(item, SweepGroup)]
        assert before == [r for r in found[:first] if not r["sweep"]]  # where its newest variant stood


SWEEP = f"sweeps/rl@{VERSION}~sweep-0badcafe"


def test_status_of_a_sweep_shows_each_variant_and_watch_ends_only_when_all_have(
    prefix: str, document: dict[str, Any]
) -> None:
    variant(document, SWEEP, "lr-a", 1e-6, state="succeeded", submitted_at=at(1))
    running = variant(document, SWEEP, "lr-b", 2e-6, state="running", finished_at=None, submitted_at=at(2))
    variant(document, f"{SWEEP[:-4]}f00d", "lr-c", 3e-6, submitted_at=at(3))  # another sweep: the whole name decides

    shown = rlaunch("status", SWEEP)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[1] == f"sweep {SWEEP}  2 variants: 1 running, 1 succeeded", lines
    assert [line.split()[:2] for line in lines[2:]] == [
        [f"sweeps/rl-lr-a@{VERSION}", "succeeded"],
        [f"sweeps/rl-lr-b@{VERSION}", "running"],
    ]
    data = json.loads(rlaunch("status", SWEEP, "--json").stdout)
    assert data["sweep"] == SWEEP and data["is_terminal"] is False
    assert [row["sweep"]["variant"] for row in data["variants"]] == ["lr-b", "lr-a"]  # newest first, as `runs`

    # the running variant's attempt ends: now every variant has, and --watch returns at once
    run_record.close_attempt(str(running), "a1", {"state": "failed", "finished_at": at(9)})
    watched = subprocess.run(
        [sys.executable, "-m", "rlaunch", "status", SWEEP, "--watch", "--interval", "0.2", "--json"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert watched.returncode == 0 and json.loads(watched.stdout)["is_terminal"] is True, watched.stderr


def test_status_of_a_sweep_with_no_variant_recorded_or_an_attempt_is_refused(prefix: str) -> None:
    missing = CliRunner().invoke(main, ["status", SWEEP])
    assert missing.exit_code == 2 and f"no variant of sweep {SWEEP} has a run record" in missing.output, missing.output
    attempt = CliRunner().invoke(main, ["status", SWEEP, "--attempt", "a1"])
    assert attempt.exit_code == 2 and "--attempt a1" in attempt.output and "name@version" in attempt.output
