"""The run record's phases: merged across writers, tabled in launch order."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlaunch.observe.render import format_phase_table, phase_table
from rlaunch.runs import run_record
from rlaunch.runs.run_record import update_attempt


def at(seconds: float) -> str:
    return f"2026-12-01T00:00:{seconds:06.3f}+00:00"


def test_table_follows_the_launch_order_with_steps_and_totals() -> None:
    phases = {
        "finished": at(9.0),
        "submitted": at(1.0),
        "replica_1_joined": at(4.5),
        "replica_0_joined": at(4.0),
        "host_started": at(2.0),
        "first_optimizer_step": at(7.0),
    }
    rows = phase_table(phases)
    assert [r[0] for r in rows] == [
        "submitted",
        "host_started",
        "replica_0_joined",
        "replica_1_joined",
        "first_optimizer_step",
        "finished",
    ]
    assert [r[2] for r in rows] == pytest.approx([0.0, 1.0, 2.0, 0.5, 2.5, 2.0])
    assert [r[3] for r in rows] == pytest.approx([0.0, 1.0, 3.0, 3.5, 6.0, 8.0])


def test_a_clock_skew_shows_as_a_negative_step_not_a_reordering() -> None:
    rows = phase_table({"child_submitted": at(5.0), "replica_0_joined": at(4.8), "finished": at(8.0)})
    assert [r[0] for r in rows] == ["child_submitted", "replica_0_joined", "finished"]
    assert rows[1][2] == pytest.approx(-0.2)
    assert format_phase_table({"submitted": at(1.0), "finished": at(3.5)}) == [
        "submitted    +0.00s  (at    0.00s)",
        "finished     +2.50s  (at    2.50s)",
    ]


def test_phases_from_different_writers_merge(tmp_path: Path) -> None:
    out = str(tmp_path)
    update_attempt(out, "run", "a1", {"state": "launching", "phases": {"graph_planned": at(1.0)}})
    update_attempt(out, "run", "a1", {"state": "running", "phases": {"host_started": at(2.0)}})
    update_attempt(out, "run", "a1", {"state": "succeeded"})
    entry = (run_record.read(out) or {})["attempts"][0]
    assert entry["state"] == "succeeded"
    assert entry["phases"] == {"graph_planned": at(1.0), "host_started": at(2.0)}


def test_marks_are_this_process_own() -> None:
    run_record.mark("graph_planned")
    assert "graph_planned" in run_record.marked()


def test_a_cancel_is_tabled_before_the_exits_it_causes() -> None:
    rows = phase_table(
        {"finished": at(9.0), "trainer_exited": at(8.5), "cancelled": at(8.0), "first_optimizer_step": at(7.0)}
    )
    assert [r[0] for r in rows] == ["first_optimizer_step", "cancelled", "trainer_exited", "finished"]


def test_a_time_that_does_not_parse_is_left_out_of_the_table() -> None:
    assert [r[0] for r in phase_table({"submitted": "t0", "host_started": "", "finished": at(3.5)})] == ["finished"]


def test_the_markers_times_are_phases_whatever_form_they_took(tmp_path: Path) -> None:
    """The join markers and rank 0's outcome or stop; epoch seconds become ISO times, other values are absent."""
    joined = tmp_path / "joined"
    joined.mkdir()
    (joined / "replica-0.json").write_text('{"started_at": "' + at(1.0) + '", "time": 2.5}')
    (joined / "replica-1.json").write_text('{"started_at": null, "time": "' + at(3.0) + '"}')
    (joined / "replica-2.json").write_text('{"time": true}')
    (tmp_path / "gang").mkdir()
    (tmp_path / "gang" / "stopped.json").write_text(
        '{"trainer_started_at": "' + at(4.0) + '", "time": "' + at(6.0) + '"}'
    )
    phases = run_record.marker_phases(str(tmp_path))
    assert phases == {
        "replica_0_joined": at(1.0),
        "inputs_staged": at(3.0),  # the last replica staged (2.5 s after the epoch is earlier)
        "trainer_started": at(4.0),
        "trainer_exited": at(6.0),
    }
    (tmp_path / "gang" / "outcome.json").write_text(
        '{"trainer_started_at": "' + at(4.0) + '", "time": "' + at(7.0) + '"}'
    )
    assert run_record.marker_phases(str(tmp_path))["trainer_exited"] == at(7.0)  # an outcome is the trainer's end
