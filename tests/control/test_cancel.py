"""`rlaunch cancel`'s decisions, in process, on runs whose jobs wait in a scripted Slurm: which jobs
an early cancel finds (the one the reference named, else the coordinator labelled with the run), the
attempt it records (also one the coordinator recorded while the cancel reached it), jobs the record
names but the backend does not know (said, exit 1), an attempt that succeeded meanwhile (it stays
succeeded), and a second cancel (the first's who, when and why stay). tests/observe and tests/launch
cancel real runs end to end."""

from __future__ import annotations

from typing import Any

import pytest
from click.testing import CliRunner

from rlaunch.artifacts import records
from rlaunch.cluster.slurm import commands
from rlaunch.control import cancel
from rlaunch.control.cancel import cancel_run, run_jobs_of
from rlaunch.control.cli import cancel as cancel_command
from rlaunch.observe.collect import collect
from rlaunch.observe.render import format_phase_table
from rlaunch.observe.resolve import resolve
from rlaunch.processes import actor
from rlaunch.runs import run_record
from tests.support.scripted_slurm import FakeSlurm

from .conftest import RUN, attempt, coordinator, output_path, record_attempt

ENDED = "2026-12-07T10:00:00.000+00:00"
NAMES_NONE = "the record names none of its jobs yet and no running coordinator is labelled with the run"


def _succeeds_when_scancelled(prefix: str, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch) -> None:
    """The host records success the moment Slurm is asked to cancel its job (its end racing the cancel)."""

    def run(argv: list[str], **kw: Any) -> str:
        if argv[0] == "scancel" and attempt(prefix)["state"] == "running":
            record_attempt(prefix, state="succeeded", finished_at=ENDED)
        return slurm.run(argv, **kw)

    monkeypatch.setattr(commands, "run", run)


def _as(monkeypatch: pytest.MonkeyPatch, user: str) -> dict[str, Any]:
    who = {"user": user, "host": f"{user}-laptop", "pid": 4242}
    monkeypatch.setattr(cancel, "actor", lambda: who)
    return who


# -- an attempt that succeeded meanwhile -------------------------------------------------------


def test_an_attempt_that_succeeds_while_its_jobs_are_stopped_stays_succeeded(
    prefix: str, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    coordinator(prefix, slurm)
    record_attempt(prefix, coordinator_job_id="77")
    _succeeds_when_scancelled(prefix, slurm, monkeypatch)
    outcome = cancel_run(resolve(RUN), "not needed")
    entry = attempt(prefix)
    assert outcome.requested == ["77"] and outcome.attempt_id == "a1"
    assert (entry["state"], entry["finished_at"]) == ("succeeded", ENDED)
    assert entry["cancelled"]["by"] == actor() and entry["cancelled"]["reason"] == "not needed"


def test_a_success_recorded_just_before_the_cancel_writes_stays_succeeded(
    prefix: str, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    coordinator(prefix, slurm)
    record_attempt(prefix, coordinator_job_id="77")
    ref = resolve(RUN)
    update = run_record._update  # every write of the record goes through it, under the record's lock

    def host_first(*args: Any, **kw: Any) -> bool:
        monkeypatch.setattr(run_record, "_update", update)
        record_attempt(prefix, state="succeeded", finished_at=ENDED)
        return update(*args, **kw)

    monkeypatch.setattr(run_record, "_update", host_first)
    cancel_run(ref)
    assert (attempt(prefix)["state"], attempt(prefix)["finished_at"]) == ("succeeded", ENDED)


def test_a_host_interrupted_by_the_cancel_is_recorded_cancelled_not_failed(
    prefix: str, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    coordinator(prefix, slurm)
    record_attempt(prefix, coordinator_job_id="77")
    ref = resolve(RUN)
    record_attempt(prefix, state="failed", finished_at=ENDED)  # the host, interrupted, recorded its end
    cancel_run(ref)
    assert (attempt(prefix)["state"], attempt(prefix)["finished_at"]) == ("cancelled", ENDED)


# -- a cancel before the attempt was recorded --------------------------------------------------


def test_a_cancel_sent_before_the_attempt_was_recorded_records_it_once_the_coordinator_did(
    prefix: str, slurm: FakeSlurm
) -> None:
    coordinator(prefix, slurm)
    ref = resolve(RUN)  # no record yet: the coordinator labelled with the run
    assert (ref.job_id, ref.record) == ("77", None)
    record_attempt(prefix, "a0", coordinator_job_id="70", state="failed")  # an earlier attempt of the run
    record_attempt(prefix, "a1", coordinator_job_id="77")  # the coordinator records its attempt meanwhile
    outcome = cancel_run(ref, "wrong data")
    assert (outcome.attempt_id, outcome.requested) == ("a1", ["77"])
    assert outcome.record_url == f"{output_path(prefix)}/cancellations/before-attempt-77.json"
    entry = attempt(prefix, "a1")
    assert entry["state"] == "cancelled" and entry["cancelled"]["reason"] == "wrong data"
    assert "cancelled" not in attempt(prefix, "a0") and attempt(prefix, "a0")["state"] == "failed"


def test_an_early_cancel_of_a_run_named_by_its_path_finds_the_coordinator_labelled_with_it(
    prefix: str, slurm: FakeSlurm
) -> None:
    coordinator(prefix, slurm, "76", run="marker/rl@2")  # another version's coordinator
    coordinator(prefix, slurm, "77")
    records.write_status(output_path(prefix), "running", identity=RUN)  # the step started; no run record yet
    ref = resolve(output_path(prefix))
    assert (ref.artifact, ref.job_id, ref.record) == (RUN, None, None)
    found = run_jobs_of(ref)
    assert [(j.role, j.job_id) for j in found.live] == [("coordinator", "77")] and found.cannot_act() is None
    assert cancel_run(ref).requested == ["77"]
    assert slurm.queue["76"] == ("PENDING", "Priority")


def test_without_a_labelled_coordinator_an_early_cancel_has_nothing_to_cancel(prefix: str, slurm: FakeSlurm) -> None:
    coordinator(prefix, slurm, "76", run="marker/rl@2")
    records.write_status(output_path(prefix), "running", identity=RUN)
    found = run_jobs_of(resolve(output_path(prefix)))
    assert (found.live, found.unreachable, found.cannot_act()) == ([], [], None)


# -- jobs the record names but the backend does not know -----------------------------------------


def _cancel_command(*args: str) -> Any:
    return CliRunner().invoke(cancel_command, [RUN, "--yes", *args])


def test_jobs_the_record_names_but_the_backend_does_not_know_are_told_and_exit_1(prefix: str, slurm: FakeSlurm) -> None:
    record_attempt(prefix, coordinator_job_id="77", child_job_id="78")  # neither is under the jobs root
    done = _cancel_command()
    assert done.exit_code == 1, done.output
    assert done.stderr == (
        f"error: cannot cancel {RUN} attempt a1 (running): coordinator 77: the backend has no record of this job; "
        "child 78: the backend has no record of this job; find its jobs with `rlaunch jobs list` and cancel them "
        "there\n"
    )
    assert slurm.scancelled() == []


def test_an_open_attempt_naming_no_job_cannot_be_cancelled(prefix: str, slurm: FakeSlurm) -> None:
    record_attempt(prefix)
    found = run_jobs_of(resolve(RUN))
    assert found.cannot_act() == NAMES_NONE


def test_an_ended_attempt_whose_jobs_are_gone_has_nothing_to_cancel(prefix: str, slurm: FakeSlurm) -> None:
    record_attempt(prefix, coordinator_job_id="77", state="succeeded")
    done = _cancel_command()
    assert done.exit_code == 0 and "nothing to cancel (attempt a1: succeeded, no job running)" in done.stdout


def test_a_live_coordinator_is_cancelled_though_the_child_is_unknown(prefix: str, slurm: FakeSlurm) -> None:
    coordinator(prefix, slurm)
    record_attempt(prefix, coordinator_job_id="77", child_job_id="78")
    found = run_jobs_of(resolve(RUN))
    assert [j.job_id for j in found.live] == ["77"] and [j.job_id for j in found.unreachable] == ["78"]
    assert found.cannot_act() is None  # the coordinator's cancel cascades to its children


# -- a second cancel ---------------------------------------------------------------------------


def _still_ending(prefix: str, slurm: FakeSlurm) -> None:
    coordinator(prefix, slurm)
    slurm.completing.add("77")  # scancel leaves it COMPLETING: a first cancel returns with it still live


@pytest.mark.parametrize("first_before_the_record", [False, True], ids=["same-attempt", "before-attempt"])
def test_a_second_cancel_keeps_who_cancelled_first_when_and_why(
    prefix: str, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch, first_before_the_record: bool
) -> None:
    _still_ending(prefix, slurm)
    if not first_before_the_record:
        record_attempt(prefix, coordinator_job_id="77")
    first_ref = resolve(RUN)
    record_attempt(prefix, coordinator_job_id="77")
    alice = _as(monkeypatch, "alice")
    cancel_run(first_ref, "wrong data")
    first = attempt(prefix)["cancelled"]
    assert (first["by"], first["reason"]) == (alice, "wrong data")
    _as(monkeypatch, "bob")
    second = cancel_run(resolve(RUN), "still running?")
    assert second.requested == ["77"]  # the job had not ended: it is told again
    kept = attempt(prefix)["cancelled"]
    assert (kept["by"], kept["at"], kept["reason"]) == (alice, first["at"], "wrong data")
    assert attempt(prefix)["state"] == "cancelled"


def test_an_earlier_request_recorded_after_a_later_one_replaces_it(
    prefix: str, slurm: FakeSlurm, monkeypatch: pytest.MonkeyPatch
) -> None:
    _still_ending(prefix, slurm)
    record_attempt(prefix, coordinator_job_id="77")
    later = "2999-01-01T00:00:00.000+00:00"  # a cancel that asked after this one but wrote first
    bob = {"user": "bob", "host": "bob-laptop", "pid": 1}
    record_attempt(prefix, cancelled={"by": bob, "at": later, "reason": "later", "states_after": {}})
    alice = _as(monkeypatch, "alice")
    cancel_run(resolve(RUN), "first")
    kept = attempt(prefix)["cancelled"]
    assert (kept["by"], kept["reason"]) == (alice, "first") and kept["at"] < later


# -- the phases of a cancelled attempt ---------------------------------------------------------

RECORDED_PHASES = {
    "submitted": "2026-12-07T09:00:00.000+00:00",
    "coordinator_started": "2026-12-07T09:00:01.000+00:00",
    "graph_planned": "2026-12-07T09:00:02.000+00:00",
    "host_started": "2026-12-07T09:00:03.000+00:00",
    "child_submitted": "2026-12-07T09:00:04.000+00:00",
}


def test_a_cancel_keeps_every_phase_recorded_before_it_and_status_shows_the_cancel_among_them(
    prefix: str, slurm: FakeSlurm
) -> None:
    coordinator(prefix, slurm)
    record_attempt(prefix, coordinator_job_id="77", phases=RECORDED_PHASES)
    ref = resolve(RUN)
    record_attempt(prefix, state="failed", finished_at=ENDED, phases={"finished": ENDED})  # the interrupted host
    cancel_run(ref, "wrong data")
    entry = attempt(prefix)
    assert entry["phases"] == {**RECORDED_PHASES, "finished": ENDED}
    shown = collect(resolve(RUN))
    assert shown.state == "cancelled"
    assert shown.phases == {**RECORDED_PHASES, "finished": ENDED, "cancelled": entry["cancelled"]["at"]}
    table = [line.split()[0] for line in format_phase_table(shown.phases)]
    assert table == [*RECORDED_PHASES, "cancelled", "finished"]
    assert shown.to_json()["phases"] == shown.phases
