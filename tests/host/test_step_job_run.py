"""A step job's path on the coordinator, in process (`StepJobLauncher.run`) against a scripted backend:
the retry gate before anything is written, the job document and the gang asked for, the run record at
each stage, a refusal before submission, a failure classified by its log tail and exit codes, a
success without its result, and a coordinator that stops following. tests/cluster/test_step_jobs.py
runs real step jobs on the local backend."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rlaunch import storage
from rlaunch.cluster.protocol import JOB_ID_ENV, JobSpec, JobState, JobStatus, ReplicaStatus
from rlaunch.host import step_job
from rlaunch.host.step_job import LOG_TAIL, TASK_MODULE, StepJobFailedError, StepJobLauncher, StepJobRefusedError
from rlaunch.launch_config.failures import classify
from rlaunch.runs import run_record
from rlaunch.runs.layout import attempt_dir, step_job_attempts_root
from rlaunch.secrets import SecretArgumentError
from rlaunch.step_jobs import StepExecution, StepInput, StepJobRequest

ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"
RETRY = {"reason": "flaky disk", "by": "me@host", "at": "2026-12-05T08:00:00+00:00"}


class Scripted:
    """A backend whose one job ends as told, writing `values` as the step's result when it succeeds."""

    name = "scripted"

    def __init__(
        self,
        state: JobState = JobState.SUCCEEDED,
        *,
        lines: tuple[str, ...] = (),
        message: str | None = None,
        codes: tuple[int | None, ...] = (0,),
        values: Any = None,
        refuse: Exception | None = None,
        interrupt: bool = False,
        output_path: str | None = None,
        broken_cleanup: bool = False,
    ) -> None:
        self.state, self.lines, self.message, self.codes = state, lines, message, codes
        self.values = {"values": {"rows": 3}} if values is None else values
        self.refuse, self.interrupt, self.output_path, self.broken_cleanup = (
            refuse,
            interrupt,
            output_path,
            broken_cleanup,
        )
        self.seen: list[str] = []  # the attempt's recorded state when checked and when followed
        self.checked: JobSpec | None = None
        self.interrupted = False
        self.calls: list[tuple[str, Any]] = []
        self.spec: JobSpec | None = None

    def environment(self) -> dict[str, str]:
        if self.interrupted and self.broken_cleanup:
            raise RuntimeError("the backend is gone too")
        return {"RLAUNCH_SCRIPTED_ROOT": "/jobs"}

    def _see(self) -> None:
        if self.output_path is not None:
            self.seen.append((run_record.read(self.output_path) or {})["attempts"][-1]["state"])

    def check(self, spec: JobSpec, *, parent: str | None = None) -> None:
        self.calls.append(("check", parent))
        self.checked = spec
        self._see()
        if self.refuse is not None:
            raise self.refuse

    def _start(self, how: str, spec: JobSpec) -> str:
        self.calls.append((how, spec.name))
        self.spec = spec
        return "job-1"

    def submit(self, spec: JobSpec) -> str:
        return self._start("submit", spec)

    def submit_child(self, spec: JobSpec) -> str:
        return self._start("submit_child", spec)

    def logs(self, job_id: str, *, follow: bool = False) -> Iterator[str]:
        self.calls.append(("logs", (job_id, follow)))
        self._see()
        yield from self.lines
        if self.interrupt:
            self.interrupted = True
            raise KeyboardInterrupt
        if self.state is JobState.SUCCEEDED and self.values != "none":
            assert self.spec is not None
            document = storage.read_json(self.spec.argv[-1])
            storage.write_json_atomic(document["result_uri"], self.values)

    def wait(self, job_id: str) -> JobStatus:
        self.calls.append(("wait", job_id))
        replicas = tuple(ReplicaStatus(r, self.state, exit_code=c) for r, c in enumerate(self.codes))
        return JobStatus(job_id, "step", self.name, self.state, replicas=replicas, message=self.message)

    def cancel(self, job_id: str, *, reason: str | None = None) -> None:
        self.calls.append(("cancel", (job_id, reason)))
        if self.broken_cleanup:
            raise RuntimeError("the backend is gone")


def _request(tmp_path: Path, **execution: Any) -> StepJobRequest:
    return StepJobRequest(
        identity="data/tok@1:abc",
        name="data/tok",
        version="1",
        fingerprint="f" * 64,
        output_path=str(tmp_path / "out"),
        prefix=str(tmp_path / "prefix"),
        function="pkg.steps:tokenise",
        config={"max_len": 512},
        inputs=(StepInput("data/raw@1:def", str(tmp_path / "raw")),),
        execution=StepExecution(**{"runtime": "trl-cpu", "cpu": 2.0, "memory": "8GB", "disk": "20GB", **execution}),
    )


def _attempts(request: StepJobRequest) -> list[dict[str, Any]]:
    return list((run_record.read(request.output_path) or {})["attempts"])


@pytest.fixture(autouse=True)
def _no_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JOB_ID_ENV, raising=False)


def test_a_step_job_is_submitted_followed_and_recorded_and_returns_its_values(tmp_path: Path) -> None:
    request, said = _request(tmp_path, nodes=1), list[str]()
    backend = Scripted(lines=("[rank 0] tokenising\n",), output_path=request.output_path)
    launcher = StepJobLauncher(backend=backend, placement={"root": "/jobs"}, working_dir=str(tmp_path))
    assert launcher.run(request, said.append) == {"rows": 3}
    assert backend.seen == ["launching", "running"] and backend.checked is backend.spec
    assert backend.calls[-1] == ("wait", "job-1")
    assert said == ["  submitted step job job-1 for data/tok@1:abc via scripted", "  [data/tok@1:abc] tokenising"]
    assert backend.calls[:3] == [("check", None), ("submit", "data-tok-1-step"), ("logs", ("job-1", True))]
    spec = backend.spec
    assert spec is not None and spec.argv[:4] == (sys.executable, "-m", TASK_MODULE, "--job")
    (entry,) = _attempts(request)
    attempt = entry["attempt_id"]
    assert re.fullmatch(r"[0-9a-f]{12}", attempt) and spec.labels["rlaunch.attempt"] == attempt
    assert entry["attempt_dir"] == attempt_dir(step_job_attempts_root(request.prefix, "data/tok", "1"), attempt)
    assert spec.working_dir == str(tmp_path) and (run_record.read(request.output_path) or {})["run_id"] == "data/tok-1"
    document = storage.read_json(spec.argv[-1])
    assert spec.argv[-1] == entry["job_document_uri"] == storage.join(entry["attempt_dir"], "step-job.json")
    assert entry["attempt_dir"].startswith(str(tmp_path / "prefix"))
    assert document == {
        "identity": "data/tok@1:abc",
        "run_id": "data/tok-1",
        "attempt_id": attempt,
        "function": "pkg.steps:tokenise",
        "config": {"max_len": 512},
        "inputs": [{"identity": "data/raw@1:def", "uri": str(tmp_path / "raw")}],
        "runtime": "trl-cpu",
        "result_uri": storage.join(entry["attempt_dir"], "step-result.json"),
    }
    assert {k: entry[k] for k in ("state", "artifact", "fingerprint", "kind", "runtime_profile", "child_job_id")} == {
        "state": "succeeded",
        "artifact": "data/tok@1:abc",
        "fingerprint": "f" * 64,
        "kind": "step",
        "runtime_profile": "trl-cpu",
        "child_job_id": "job-1",
    }
    assert entry["resources"] == {
        "cpu": 2.0,
        "memory_bytes": 8 * 10**9,
        "disk_bytes": 20 * 10**9,
        "accelerators": 0,
        "accelerator_type": None,
        "nodes": 1,
    }
    assert (entry["backend"], entry["placement"], entry["backend_settings"]) == (
        "scripted",
        {"root": "/jobs"},
        {"RLAUNCH_SCRIPTED_ROOT": "/jobs"},
    )
    assert entry["argv"] == list(spec.argv) and entry["coordinator_job_id"] is None
    assert re.match(ISO, entry["submitted_at"]) and re.match(ISO, entry["finished_at"])
    assert "retry" not in entry and "failure" not in entry


def test_inside_a_job_the_step_job_is_its_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(JOB_ID_ENV, "coord-1")
    request, backend = _request(tmp_path, nodes=2), Scripted(lines=("[rank 0] a\n",))
    StepJobLauncher(backend=backend).run(request, lambda _: None)
    assert backend.calls[:2] == [("check", "coord-1"), ("submit_child", "data-tok-1-step")]
    assert _attempts(request)[0]["coordinator_job_id"] == "coord-1"


def test_a_multi_node_job_keeps_its_rank_prefixes(tmp_path: Path) -> None:
    said: list[str] = []
    StepJobLauncher(backend=Scripted(lines=("[rank 1] b\n",))).run(_request(tmp_path, nodes=2), said.append)
    assert said[1] == "  [data/tok@1:abc] [rank 1] b"


def test_a_job_refused_before_submission_is_recorded_refused(tmp_path: Path) -> None:
    request = _request(tmp_path)
    backend = Scripted(refuse=RuntimeError("no node has 2 CPU"))
    with pytest.raises(StepJobRefusedError) as refused:
        StepJobLauncher(backend=backend).run(request, lambda _: None)
    assert str(refused.value) == "data/tok@1:abc: RuntimeError: no node has 2 CPU; nothing was submitted"
    assert [c for c, _ in backend.calls] == ["check"]
    (entry,) = _attempts(request)
    assert (entry["state"], entry["refused"], entry["failure"]) == (
        "failed",
        True,
        "RuntimeError: no node has 2 CPU; nothing was submitted",
    )
    assert re.match(ISO, entry["finished_at"])


@pytest.mark.parametrize(
    ("state", "message", "failure"),
    [
        (JobState.FAILED, "replica 0 exited 1", "step job job-1 reached failed: replica 0 exited 1"),
        (JobState.FAILED, None, "step job job-1 reached failed"),
        (JobState.CANCELLED, "cancelled by me", "step job job-1 reached cancelled: cancelled by me"),
    ],
)
def test_a_job_that_did_not_succeed_is_recorded_and_classified_by_its_tail(
    tmp_path: Path, state: JobState, message: str | None, failure: str
) -> None:
    request = _request(tmp_path)
    lines = ("[rank 0] loading\n", "[rank 0] CUDA out of memory\n")
    backend = Scripted(state, lines=lines, message=message, codes=(1,))
    with pytest.raises(StepJobFailedError) as failed:
        StepJobLauncher(backend=backend).run(request, lambda _: None)
    assert str(failed.value) == f"data/tok@1:abc: {failure}"
    (entry,) = _attempts(request)
    assert (entry["state"], entry["failure"]) == (state.value, failure)
    tail = ["loading\n", "CUDA out of memory\n"]
    assert entry["failure_class"] == classify(failure, tail, [1]).to_json()
    assert re.match(ISO, entry["finished_at"])


def test_a_success_without_its_result_fails(tmp_path: Path) -> None:
    request = _request(tmp_path)
    with pytest.raises(StepJobFailedError, match="succeeded but left no result at "):
        StepJobLauncher(backend=Scripted(values="none")).run(request, lambda _: None)
    (entry,) = _attempts(request)
    result = storage.join(entry["attempt_dir"], "step-result.json")
    assert (entry["state"], entry["failure"]) == ("failed", f"step job job-1 succeeded but left no result at {result}")
    assert re.match(ISO, entry["finished_at"])


def test_a_result_without_values_gives_none(tmp_path: Path) -> None:
    assert StepJobLauncher(backend=Scripted(values={"values": None})).run(_request(tmp_path), lambda _: None) == {}


def test_a_coordinator_that_stops_following_cancels_and_records_the_job(tmp_path: Path) -> None:
    request, backend = _request(tmp_path), Scripted(interrupt=True)
    with pytest.raises(KeyboardInterrupt):
        StepJobLauncher(backend=backend).run(request, lambda _: None)
    assert backend.calls[-1] == ("cancel", ("job-1", "the coordinator stopped following its step job"))
    (entry,) = _attempts(request)
    assert (entry["state"], entry["failure"]) == (
        "cancelled",
        "the coordinator was interrupted; the step job was cancelled",
    )
    assert re.match(ISO, entry["finished_at"])


def test_a_failed_latest_attempt_is_relaunched_only_with_the_retry_authorisation(tmp_path: Path) -> None:
    request = _request(tmp_path)
    with pytest.raises(StepJobFailedError):
        StepJobLauncher(backend=Scripted(JobState.FAILED, message="boom\nmore")).run(request, lambda _: None)
    backend = Scripted()
    with pytest.raises(StepJobRefusedError) as refused:
        StepJobLauncher(backend=backend).run(request, lambda _: None)
    first = _attempts(request)[0]["attempt_id"]
    assert str(refused.value) == (
        f"data/tok@1:abc: retry: the latest attempt {first} failed (step job job-1 reached failed: boom); "
        'relaunching it is a retry: pass --retry "<reason>" (who, when and why are kept in the run record), or '
        "launch a new version"
    )
    assert backend.calls == [] and len(_attempts(request)) == 1  # nothing written, nothing asked
    assert StepJobLauncher(retry=RETRY, backend=backend).run(request, lambda _: None) == {"rows": 3}
    second = _attempts(request)[1]
    assert (second["state"], second["retry"]) == ("succeeded", RETRY)
    third = StepJobLauncher(retry=RETRY, backend=Scripted())  # the latest succeeded: no retry to record
    third.run(request, lambda _: None)
    assert "retry" not in _attempts(request)[2]


def test_without_a_backend_of_its_own_it_uses_the_jobs_backend_else_the_local_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []
    local, enclosing = Scripted(), Scripted()

    def get_backend(name: str) -> Scripted:
        made.append(name)
        return local

    monkeypatch.setattr(step_job, "get_backend", get_backend)
    monkeypatch.setattr(step_job, "backend_from_env", lambda: None)
    StepJobLauncher().run(_request(tmp_path / "a"), lambda _: None)
    assert made == ["local"] and local.spec is not None and local.spec.working_dir == os.getcwd()
    monkeypatch.setattr(step_job, "backend_from_env", lambda: enclosing)
    StepJobLauncher().run(_request(tmp_path / "b"), lambda _: None)
    assert made == ["local"] and enclosing.spec is not None


def test_a_credential_in_the_config_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    token = "ghp_" + "aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6"
    request, backend = _request(tmp_path), Scripted()
    request = StepJobRequest(**{**request.__dict__, "config": {"hub": {"token": token}}})
    with pytest.raises(SecretArgumentError) as refused:
        StepJobLauncher(backend=backend).run(request, lambda _: None)
    assert "the step job document of data/tok@1:abc" in str(refused.value) and token not in str(refused.value)
    assert "config.hub.token" in str(refused.value)
    assert backend.calls == [] and run_record.read(request.output_path) is None


def test_the_failure_is_classed_by_its_own_words_the_last_lines_and_the_exit_codes(tmp_path: Path) -> None:
    early = tuple(f"[rank 0] line {n}\n" for n in range(60))
    lines = ("[rank 0] CUDA out of memory\n", *early, *(f"[rank 0] step {n}\n" for n in range(LOG_TAIL)))
    cases = [  # (message, lines, codes)
        (None, lines, (137,)),  # the out-of-memory line is older than the tail: the exit code decides
        ("CUDA out of memory", early, (1,)),  # the job's own word decides
    ]
    for n, (message, logged, codes) in enumerate(cases):
        request = _request(tmp_path / str(n))
        with pytest.raises(StepJobFailedError):
            StepJobLauncher(backend=Scripted(JobState.FAILED, lines=logged, message=message, codes=codes)).run(
                request, lambda _: None
            )
        (entry,) = _attempts(request)
        tail = [line.removeprefix("[rank 0] ") for line in logged][-LOG_TAIL:]
        assert entry["failure_class"] == classify(entry["failure"], tail, list(codes)).to_json()
        if message is None:
            assert entry["failure_class"] != classify(entry["failure"], tail).to_json()  # the codes count
            whole = [line.removeprefix("[rank 0] ") for line in logged]
            assert entry["failure_class"] != classify(entry["failure"], whole, list(codes)).to_json()
        else:
            assert entry["failure_class"] != classify(None, tail, list(codes)).to_json()


def test_a_coordinator_interrupted_while_the_backend_is_gone_still_stops(tmp_path: Path) -> None:
    request, backend = _request(tmp_path), Scripted(interrupt=True, broken_cleanup=True)
    with pytest.raises(KeyboardInterrupt):
        StepJobLauncher(backend=backend).run(request, lambda _: None)
    assert backend.calls[-1][0] == "cancel" and _attempts(request)[0]["state"] == "running"


@pytest.mark.parametrize(
    ("failure", "why"),
    [(None, ""), ("", ""), ("x" * 201 + "\nsecond line", " (" + "x" * 200 + " ...)")],
)
def test_the_retry_refusal_quotes_the_first_line_of_the_failure_cut_at_200_and_says_so(
    tmp_path: Path, failure: str | None, why: str
) -> None:
    request = _request(tmp_path)
    run_record.update_attempt(request.output_path, "data/tok-1", "a0", {"state": "cancelled", "failure": failure})
    with pytest.raises(StepJobRefusedError) as refused:
        StepJobLauncher(backend=Scripted()).run(request, lambda _: None)
    assert str(refused.value) == (
        f"data/tok@1:abc: retry: the latest attempt a0 cancelled{why}; relaunching it is a retry: pass --retry "
        '"<reason>" (who, when and why are kept in the run record), or launch a new version'
    )


def test_a_step_job_of_a_long_artifact_name_is_named_within_the_job_name_limit(tmp_path: Path) -> None:
    """A step's artifact name (up to 200 characters, with `/`) makes its job's name: cut to the 63 a
    job name may have and its `/` folded, never refused by the JobSpec's name rule."""
    request = replace(_request(tmp_path), name="data/" + "t" * 95 + "/" + "u" * 99)
    expected = "data-" + "t" * 58
    assert step_job.step_job_spec(request, "a" * 12, "/doc.json", None).name == expected
    assert step_job.gang_for_check(request.execution, request.name).name == expected
