"""A step job that ships the experiment's code: the coordinator publishes the files it fingerprinted
under the prefix by their digest and names them in the job document; the task stages them and imports
the step's function from that copy, with the copy on the PYTHONPATH of the runtime tools it starts.
The backend runs the task in process (a fake below the `Backend` protocol)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlaunch import storage
from rlaunch.cluster.protocol import JOB_ID_ENV, JobSpec, JobState, JobStatus, ReplicaStatus
from rlaunch.experiment_code import CODE_PATH_ENV, ExperimentCode, code_uri
from rlaunch.host.step_job import StepJobLauncher
from rlaunch.step_jobs import StepExecution, StepJobRequest
from rlaunch.task import step_entry
from tests.support.shipped_code import experiment_tree

STEP = """import json, os

def count(config):
    with open(config["out"], "w") as handle:
        json.dump({"file": __file__, "code_path": os.environ.get("RLAUNCH_EXPERIMENT_CODE")}, handle)
"""


class InProcess:
    """A backend whose one job is the step task, run here when it is submitted."""

    name = "in-process"

    def __init__(self) -> None:
        self.spec: JobSpec | None = None

    def environment(self) -> dict[str, str]:
        return {}

    def check(self, spec: JobSpec, *, parent: str | None = None) -> None:
        self.spec = spec

    def submit(self, spec: JobSpec) -> str:
        step_entry.main(list(spec.argv[-2:]))
        return "job-1"

    submit_child = submit

    def logs(self, job_id: str, *, follow: bool = False) -> Iterator[str]:
        yield from ()

    def wait(self, job_id: str) -> JobStatus:
        return JobStatus(
            job_id, "step", self.name, JobState.SUCCEEDED, replicas=(ReplicaStatus(0, JobState.SUCCEEDED, 0),)
        )

    def cancel(self, job_id: str, *, reason: str | None = None) -> None:
        raise AssertionError("nothing to cancel")


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.delenv(JOB_ID_ENV, raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the task puts the staged code first; undone after
    monkeypatch.setenv(CODE_PATH_ENV, "")  # and names it to the processes it starts; undone after
    for work in experiment_tree(tmp_path, monkeypatch):
        (work / "shipexp/steps.py").write_text(STEP)
        yield work


def test_the_step_job_imports_its_function_from_the_shipped_code(tree: Path, tmp_path: Path) -> None:
    code = ExperimentCode(modules=("shipexp",))
    out = tmp_path / "seen.json"
    request = StepJobRequest(
        identity=f"data/count@1:{'f' * 64}",
        name="data/count",
        version="1",
        fingerprint="f" * 64,
        output_path=str(tmp_path / "prefix/data/count/1"),
        prefix=str(tmp_path / "prefix"),
        function="shipexp.steps:count",
        config={"out": str(out)},
        inputs=(),
        execution=StepExecution(),
        code=code,
    )
    StepJobLauncher(backend=InProcess()).run(request, lambda _: None)

    bundle = Path(code_uri(request.prefix, code.digest))
    assert json.loads((bundle / "code.json").read_text())["digest"] == code.digest
    (document,) = Path(request.prefix).glob("**/step-job.json")
    assert storage.read_json(str(document))["code"] == {"uri": str(bundle), "digest": code.digest}
    seen = json.loads(out.read_text())
    staged = tmp_path / "staging/data-count-1"
    assert seen["file"].startswith(f"{staged}/") and seen["file"].endswith("/code/shipexp/steps.py"), seen
    assert seen["code_path"] == seen["file"].removesuffix("/shipexp/steps.py")
