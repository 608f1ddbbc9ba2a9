"""What the runner writes and says: the record, the status at each stage, the lock it holds while
building, waiting on another runner's lock, and the lines a researcher reads."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time

import pytest

from rlaunch import storage
from rlaunch.artifacts import Directory, FingerprintDriftError, RunFailedError, Runner, records
from rlaunch.artifacts.lock import LOCK_FILE
from rlaunch.artifacts.records import Provenance
from rlaunch.artifacts.runner import StepOutcome
from rlaunch.launch_config.typed import DocumentError
from rlaunch.skyrl.plan.launcher import LaunchFailedError
from rlaunch.skyrl.values.preflight_error import PreflightError

from .helpers import DAY, Count, Label, make_step, quiet

PROVENANCE = Provenance(
    user="alice",
    host="box",
    time="2026-11-30T00:00:00.000+00:00",
    git_commit="abc123",
    git_dirty=False,
    argv=("experiments/x.py", "--run"),
    cwd="/work",
)


def _runner(prefix, messages=None, **kwargs) -> Runner:
    kwargs.setdefault("provenance", PROVENANCE)
    kwargs.setdefault("report", quiet(messages if messages is not None else []))
    return Runner(prefix, **kwargs)


def _lock_url(path: str) -> str:
    return storage.join(path, LOCK_FILE)


def _plant_live_lock(path: str, owner: str = "other-runner") -> None:
    """A lock held by a live runner on this host (this very process, so it never looks dead)."""
    payload = {"owner": owner, "host": socket.gethostname(), "pid": os.getpid(), "heartbeat_at": time.time()}
    storage.write_bytes_atomic(_lock_url(path), json.dumps(payload).encode())


def test_the_record_holds_identity_recipe_result_and_provenance(prefix):
    data = make_step("data")
    step = make_step(
        "m",
        deps=(data,),
        artifact_type=Count,
        literals={"lr": 0.5},
        result=lambda c: Count(path=c["output_path"], value=7),
    )
    before = storage.utc_now()
    _runner(prefix).run([step])
    record = records.read_record(step.path(prefix))
    assert record["schema"] == records.RECORD_SCHEMA
    assert (record["name"], record["version"]) == ("m", DAY)
    assert record["fingerprint"] == step.fingerprint
    assert record["result_type"] == Count.type_name()
    assert record["output_path"] == step.path(prefix)
    assert record["deps"] == ["data@" + DAY]
    assert record["config"] == {
        "output_path": step.path(prefix),
        "inputs": [data.path(prefix)],
        "lr": 0.5,
    }  # the real paths, not the placeholders
    assert record["fingerprint_payload"] == json.loads(step.fingerprint_payload)
    assert record["result"] == {"value": 7}
    assert record["provenance"] == PROVENANCE.to_json()
    assert before <= record["written_at"] <= storage.utc_now()


def test_a_config_without_a_canonical_form_is_recorded_as_unrepresentable(prefix):
    def build(ctx):
        # The fingerprint sees plain data; the run's config carries an object (e.g. a client).
        return {"output_path": ctx.output_path, "client": object() if ctx.output_path != "<output_path>" else None}

    step = make_step("m", build_config=build)
    _runner(prefix).run([step])
    config = records.read_record(step.path(prefix))["config"]
    assert list(config) == ["__unrepresentable__"]
    assert config["__unrepresentable__"].startswith("config.client:") and "object" in config["__unrepresentable__"]


def test_status_is_running_with_the_lock_held_while_the_step_runs_then_succeeded(prefix):
    seen = {}

    def run(config):
        path = config["output_path"]
        seen["status"] = records.read_status(path)
        seen["lock"] = storage.read_json(_lock_url(path))
        seen["record"] = records.read_record(path)

    step = make_step("m", run=run)
    path = step.path(prefix)
    _runner(prefix).run([step])
    owner = seen["lock"]["owner"]
    assert owner.startswith(f"{socket.gethostname()}:{os.getpid()}:")
    assert seen["status"]["state"] == records.RUNNING and seen["record"] is None
    status = records.read_status(path)
    for stage in (seen["status"], status):
        assert (stage["owner"], stage["identity"], stage["fingerprint"]) == (owner, "m@" + DAY, step.fingerprint)
        assert stage["error"] is None
    assert status["state"] == records.SUCCEEDED
    assert not storage.exists(_lock_url(path))  # released


def test_a_failing_step_leaves_a_failed_status_naming_the_error_and_the_traceback_is_reported(prefix):
    step = make_step("m", fail=True)
    messages: list[str] = []
    with pytest.raises(RunFailedError) as err:
        _runner(prefix, messages).run([step])
    [failed] = err.value.failed
    assert (failed.action, failed.path, failed.error) == ("failed", step.path(prefix), "RuntimeError: boom in m")
    assert failed.value is None and failed.seconds > 0
    status = records.read_status(step.path(prefix))
    assert status["state"] == records.FAILED
    assert status["error"] == "RuntimeError: boom in m"
    assert (status["identity"], status["fingerprint"]) == ("m@" + DAY, step.fingerprint)
    assert status["owner"] and status["owner"].startswith(socket.gethostname())
    assert records.read_record(step.path(prefix)) is None
    assert not storage.exists(_lock_url(step.path(prefix)))
    [report] = [m for m in messages if "Traceback" in m]
    assert report.startswith("  m@2026.11.30 raised an error rlaunch did not anticipate; this is a bug")
    assert report.endswith("RuntimeError: boom in m")
    assert "  FAILED m@2026.11.30: RuntimeError: boom in m" in messages


@pytest.mark.parametrize(
    "error",
    [
        LaunchFailedError("RL attempt a1 ended failed: child job j reached failed: exit code 3"),
        DocumentError(["run.attempt_id: 'a b' is not a name (use letters, digits, '-')"]),
        PreflightError("batch.train_mini", ["role_plan.train_batch_size"], "3 is not a multiple of 2", "choose 2"),
    ],
    ids=["a failed launch", "a refused document", "a refused plan"],
)
def test_a_step_failing_for_a_known_reason_prints_the_reason_alone(prefix, error):
    """A failed launch or a refused document is its one-line reason, without rlaunch's own traceback."""

    def run(config):
        raise error

    messages: list[str] = []
    with pytest.raises(RunFailedError) as err:
        _runner(prefix, messages).run([make_step("m", run=run)])
    line = f"  FAILED m@2026.11.30: {type(error).__name__}: {error}"
    assert messages[-1] == line and err.value.failed[0].error == line.split(": ", 1)[1]
    assert not any("Traceback" in m or "this is a bug" in m for m in messages), messages


def test_a_step_exiting_reports_no_traceback_but_records_the_exit(prefix):
    step = make_step("m", run=lambda config: sys.exit(4))
    messages: list[str] = []
    with pytest.raises(RunFailedError) as err:
        _runner(prefix, messages).run([step])
    assert err.value.failed[0].error == "SystemExit: 4"
    assert records.read_status(step.path(prefix))["error"] == "SystemExit: 4"
    assert not any(m.startswith("Traceback") for m in messages)


def test_the_lines_a_researcher_reads(prefix):
    a = make_step("a")
    dev = make_step("d", "alice-dev", deps=(a,))
    messages: list[str] = []
    _runner(prefix, messages).run([dev])
    assert messages[0] == "  building a@2026.11.30"
    assert messages[1].startswith("  built a@2026.11.30 (") and messages[1].endswith(f"s) -> {a.path(prefix)}")
    assert messages[2] == "  rebuilding d@alice-dev"
    assert messages[3].startswith("  rebuilt (mutable) d@alice-dev (")
    assert messages[3].endswith(f"s) -> {dev.path(prefix)}")
    assert len(messages) == 4
    messages.clear()
    _runner(prefix, messages).run([a])
    [served] = messages
    assert served.startswith("  served from storage a@2026.11.30 (") and served.endswith(f"s) -> {a.path(prefix)}")


def test_seconds_are_the_step_s_own_wall_time(prefix):
    started = time.monotonic()
    [outcome] = _runner(prefix).run([make_step("a")])
    assert 0 < outcome.seconds <= time.monotonic() - started
    [served] = _runner(prefix).run([make_step("a")])
    assert 0 < served.seconds <= time.monotonic() - started


def test_a_skipped_dependent_names_the_failed_dependencies(prefix):
    a = make_step("a", fail=True)
    b = make_step("b", fail=True)
    c = make_step("c", deps=(a, b))
    messages: list[str] = []
    with pytest.raises(RunFailedError) as err:
        _runner(prefix, messages).run([c])
    outcomes = {o.identity: o for o in err.value.failed}
    assert outcomes["c@2026.11.30"].action == "skipped"
    assert outcomes["c@2026.11.30"].error == "dependency failed: a@2026.11.30, b@2026.11.30"
    assert outcomes["c@2026.11.30"].path == c.path(prefix)
    assert "  skipped c@2026.11.30: dependency failed (a@2026.11.30, b@2026.11.30)" in messages
    assert str(err.value) == "3 step(s) failed: a@2026.11.30, b@2026.11.30, c@2026.11.30"
    assert err.value.failed == [outcomes[i] for i in ("a@2026.11.30", "b@2026.11.30", "c@2026.11.30")]


def test_outcomes_come_back_in_dependency_order_with_their_paths(prefix):
    a = make_step("a")
    b = make_step("b", deps=(a,))
    c = make_step("c", deps=(b,))
    outcomes = _runner(prefix, max_concurrent=1).run([c])
    assert [(o.identity, o.path, o.ok) for o in outcomes] == [(s.identity, s.path(prefix), True) for s in (a, b, c)]


@pytest.mark.parametrize(
    ("action", "ok"), [("built", True), ("rebuilt", True), ("served", True), ("failed", False), ("skipped", False)]
)
def test_an_outcome_is_ok_only_when_the_step_has_its_output(action, ok):
    assert StepOutcome("a@2026.11.30", action, "/p").ok is ok


def _rewrite_record(step, prefix, **changes) -> None:
    record = records.read_record(step.path(prefix))
    for key, value in changes.items():
        if value is None:
            del record[key]
        else:
            record[key] = value
    records.write_record(step.path(prefix), record)


def test_a_fingerprint_that_differs_with_an_equal_payload_drifts_at_an_unknown_field(prefix):
    step = make_step("m", literals={"lr": 0.1})
    _runner(prefix).run([step])
    _rewrite_record(step, prefix, fingerprint="0" * 64)
    messages: list[str] = []
    [outcome] = _runner(prefix, messages).run([make_step("m", literals={"lr": 0.1})])
    assert outcome.drift == ["<unknown>"]
    assert messages[0] == (
        "  warning: m@2026.11.30 is served from storage, but its recipe changed since it was built "
        "(differs at: <unknown>). Bump the version to build the new recipe."
    )


def test_a_record_without_its_payload_drifts_at_every_part_of_the_recipe(prefix):
    step = make_step("m", literals={"lr": 0.1})
    _runner(prefix).run([step])
    _rewrite_record(step, prefix, fingerprint="0" * 64, fingerprint_payload=None)
    [outcome] = _runner(prefix).run([make_step("m", literals={"lr": 0.1})])
    assert outcome.drift == ["config", "deps", "type"]


def test_the_drift_warning_lists_every_changed_field(prefix):
    _runner(prefix).run([make_step("m", literals={"lr": 0.1, "layers": 2})])
    messages: list[str] = []
    [outcome] = _runner(prefix, messages).run([make_step("m", literals={"lr": 0.2, "layers": 3})])
    assert outcome.drift == ["config.layers", "config.lr"]
    assert messages[0] == (
        "  warning: m@2026.11.30 is served from storage, but its recipe changed since it was built "
        "(differs at: config.layers, config.lr). Bump the version to build the new recipe."
    )


def test_a_pinned_step_with_drift_fails_naming_the_pin_and_every_field(prefix):
    _runner(prefix).run([make_step("m", literals={"lr": 0.1, "layers": 2})])
    new = make_step("m", literals={"lr": 0.2, "layers": 3})
    pinned = make_step("m", literals={"lr": 0.2, "layers": 3}, expected_fingerprint=new.fingerprint[:12])
    with pytest.raises(RunFailedError) as err:
        _runner(prefix).run([pinned])
    [failed] = err.value.failed
    assert failed.error == (
        f"FingerprintDriftError: m@2026.11.30 is pinned to fingerprint {new.fingerprint[:12]} but its stored "
        "output was built from another recipe (differs at config.layers, config.lr); bump the version"
    )
    assert FingerprintDriftError.__name__ in failed.error


class _On:
    """A reporter that collects lines and, at the first line starting with `start`, does `then()`:
    what another runner does at that moment."""

    def __init__(self, start: str, then) -> None:
        self.start, self.then = start, then
        self.messages: list[str] = []

    def __call__(self, message: str) -> None:
        self.messages.append(message)
        if message.startswith(self.start) and self.then is not None:
            then, self.then = self.then, None
            then()


def test_a_served_output_that_lost_its_record_fails_and_says_what_to_do(prefix):
    m = make_step("m")
    _runner(prefix).run([m])
    first = make_step("first")
    # Planned as served; the record disappears before the runner gets to it.
    report = _On("  built first", lambda: storage.remove(storage.join(m.path(prefix), records.RECORD_FILE)))
    with pytest.raises(RunFailedError) as err:
        _runner(prefix, max_concurrent=1, report=report).run([first, m])
    [failed] = err.value.failed
    assert failed.identity == "m@2026.11.30" and failed.action == "failed"
    assert failed.error == (
        f"FileNotFoundError: m@2026.11.30: stored output at {m.path(prefix)} lost its record; rerun with a new version"
    )


def _release(path: str):
    return lambda: storage.remove(_lock_url(path))


def _finish_elsewhere(step, prefix):
    """Another runner completes `step` (it held the lock until then)."""

    def finish() -> None:
        storage.remove(_lock_url(step.path(prefix)))
        _runner(prefix).run([step])

    return finish


def test_a_runner_that_finds_the_lock_held_waits_and_serves_what_the_holder_built(prefix, recorder):
    step = make_step("m", recorder=recorder)
    _plant_live_lock(step.path(prefix), owner="host-b:42:cafe")
    report = _On("  waiting for", _finish_elsewhere(step, prefix))
    [outcome] = _runner(prefix, poll_seconds=0, report=report).run([step])
    assert outcome.action == "served" and outcome.path == step.path(prefix)
    assert recorder.count("m") == 1  # built once, by the other runner
    assert report.messages[0] == "  waiting for m@2026.11.30: being built by host-b:42:cafe"


def test_a_build_finished_while_its_holder_still_holds_the_lock_is_served_without_waiting_for_it(prefix, recorder):
    """The holder wrote its record and has not let go yet (it is still reporting, say): the waiting
    runner serves the record it sees succeeded instead of waiting for the lock."""
    step = make_step("m", recorder=recorder)
    _plant_live_lock(step.path(prefix), owner="host-b:42:cafe")

    def finish_and_hold() -> None:
        _finish_elsewhere(step, prefix)()
        _plant_live_lock(step.path(prefix), owner="host-b:42:cafe")

    report = _On("  waiting for", finish_and_hold)
    [outcome] = _runner(prefix, poll_seconds=0, report=report).run([step])
    assert outcome.action == "served" and recorder.count("m") == 1
    assert storage.exists(_lock_url(step.path(prefix)))  # the holder's lock is not this runner's to remove


def test_a_runner_waiting_on_an_unreadable_lock_names_another_runner(prefix):
    step = make_step("m")
    storage.write_bytes_atomic(_lock_url(step.path(prefix)), b"{not json")
    report = _On("  waiting for", _release(step.path(prefix)))
    [outcome] = _runner(prefix, poll_seconds=0, report=report).run([step])
    assert outcome.action == "built"
    assert report.messages[0] == "  waiting for m@2026.11.30: being built by another runner"


def test_a_waiting_runner_says_so_once_and_builds_once_the_holder_lets_go(prefix, recorder):
    step = make_step("m", recorder=recorder)
    _plant_live_lock(step.path(prefix))
    # The holder lets go a little later, while this runner polls many times.
    release = threading.Timer(0.05, _release(step.path(prefix)))
    report = _On("  waiting for", release.start)
    [outcome] = _runner(prefix, poll_seconds=0.001, report=report).run([step])
    release.join()
    assert outcome.action == "built" and recorder.count("m") == 1
    assert records.is_succeeded(step.path(prefix))
    assert sum(m.startswith("  waiting for") for m in report.messages) == 1


def test_an_unbuilt_step_is_built_only_once_its_holder_lets_go(prefix):
    """A step the holder has not finished is never built beside it: the build starts after the
    holder's lock is gone."""
    lock_url = _lock_url(make_step("m").path(prefix))
    held_at_build: list[bool] = []
    step = make_step("m", run=lambda config: held_at_build.append(storage.exists(lock_url) and _planted(lock_url)))
    _plant_live_lock(step.path(prefix))
    release = threading.Timer(0.1, _release(step.path(prefix)))
    report = _On("  waiting for", release.start)
    [outcome] = _runner(prefix, poll_seconds=0.01, report=report).run([step])
    release.join()
    assert outcome.action == "built" and held_at_build == [False]


def _planted(lock_url: str) -> bool:
    return (storage.read_json(lock_url) or {}).get("owner") == "other-runner"


def test_a_mutable_step_is_rebuilt_after_waiting_even_if_the_holder_succeeded(prefix, recorder):
    step = make_step("m", "alice-dev", recorder=recorder)
    _runner(prefix).run([step])  # an earlier build: succeeded, with a record
    _plant_live_lock(step.path(prefix))
    report = _On("  waiting for", _release(step.path(prefix)))
    [outcome] = _runner(prefix, poll_seconds=0, report=report).run([step])
    assert outcome.action == "rebuilt" and recorder.count("m") == 2


def test_a_step_finished_by_another_runner_after_planning_is_served_not_rebuilt(prefix, recorder):
    """Planned as `run`; another runner builds it meanwhile and lets go before this runner locks it."""
    first = make_step("first")
    step = make_step("m", recorder=recorder)
    report = _On("  built first", _finish_elsewhere(step, prefix))
    outcomes = _runner(prefix, max_concurrent=1, report=report).run([first, step])
    assert [o.action for o in outcomes] == ["built", "served"]
    assert recorder.count("m") == 1
    assert not any("building m" in m for m in report.messages)


def test_an_explicit_prefix_wins_over_the_configured_one(tmp_path, monkeypatch):
    configured, explicit = str(tmp_path / "configured"), str(tmp_path / "explicit")
    monkeypatch.setenv(storage.PREFIX_ENV, configured)
    data = make_step("data", artifact_type=Count, result=lambda c: Count(path=c["output_path"], value=3))

    def build(ctx):
        value = None if ctx.is_fingerprint else ctx.resolved(data).value  # read from the stored record
        return {"output_path": ctx.output_path, "data": ctx.artifact_path(data), "value": value}

    step = make_step("m", deps=(data,), build_config=build)
    runner = _runner(explicit)
    assert runner.prefix == explicit
    runner.run([step])
    config = records.read_record(step.path(explicit))["config"]
    assert config == {"output_path": step.path(explicit), "data": data.path(explicit), "value": 3}
    assert storage.read_text(storage.join(step.path(explicit), "out.txt")) == "m"
    assert not storage.exists(configured)


def test_runner_defaults_run_eight_steps_at_once():
    runner = Runner("/unused", provenance=PROVENANCE)
    assert runner.max_concurrent == 8 and runner.report is print


def test_a_step_returning_nothing_yields_a_value_at_its_output_path(prefix):
    step = make_step("m")
    [outcome] = _runner(prefix).run([step])
    assert outcome.value == Directory(path=step.path(prefix))


def test_a_step_returning_another_type_fails_naming_both_types(prefix):
    step = make_step("m", artifact_type=Count, result=lambda c: Label(path=c["output_path"], text="no"))
    with pytest.raises(RunFailedError) as err:
        _runner(prefix).run([step])
    assert err.value.failed[0].error == (
        f"ArtifactTypeMismatchError: m@2026.11.30: run() returned Label, expected {Count.type_name()}"
    )


def test_a_result_without_a_canonical_form_fails_the_step_naming_the_field(prefix):
    step = make_step("m", artifact_type=Count, result=lambda c: Count(path=c["output_path"], value=float("nan")))
    with pytest.raises(RunFailedError) as err:
        _runner(prefix).run([step])
    assert err.value.failed[0].error.startswith("CanonicalizationError: result.value: nan has no canonical JSON form")
    assert records.read_record(step.path(prefix)) is None
    assert records.read_status(step.path(prefix))["state"] == records.FAILED


def test_a_served_step_takes_no_lock_and_never_waits(prefix):
    """Serving only reads: a lock someone holds on a finished output does not delay it."""
    step = make_step("m")
    _runner(prefix).run([step])
    _plant_live_lock(step.path(prefix))
    lock = storage.read_bytes(_lock_url(step.path(prefix)))
    messages: list[str] = []
    [outcome] = _runner(prefix, messages, poll_seconds=0).run([step])
    assert outcome.action == "served"
    assert len(messages) == 1 and messages[0].startswith("  served from storage m@2026.11.30")
    assert storage.read_bytes(_lock_url(step.path(prefix))) == lock
