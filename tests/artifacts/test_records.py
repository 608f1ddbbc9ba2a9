"""The record and status beside every output, and the provenance they carry."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rlaunch import storage
from rlaunch.artifacts import RunFailedError, Runner, records
from rlaunch.artifacts.records import Provenance, redact_argv

from .helpers import Count, make_step, quiet


def _provenance(argv=("experiments/x.py", "--version", "2026.11.30", "--run")) -> Provenance:
    return Provenance.capture(list(argv))


def test_a_record_and_a_status_are_written_beside_the_output(any_prefix, recorder):
    dep = make_step("data/toy", recorder=recorder)
    step = make_step(
        "models/tiny",
        deps=(dep,),
        literals={"lr": 0.5},
        artifact_type=Count,
        recorder=recorder,
        result=lambda c: Count(path=c["output_path"], value=42),
    )
    Runner(any_prefix, provenance=_provenance(), report=quiet([])).run([step])
    path = step.path(any_prefix)
    assert path == storage.join(any_prefix, "models/tiny", "2026.11.30")
    record = storage.read_json(storage.join(path, ".artifact.json"))
    assert record == records.read_record(path)
    assert record["name"] == "models/tiny" and record["version"] == "2026.11.30"
    assert record["fingerprint"] == step.fingerprint
    assert record["result_type"] == Count.type_name()
    assert record["deps"] == ["data/toy@2026.11.30"]
    assert record["config"] == {
        "output_path": path,
        "inputs": [dep.path(any_prefix)],
        "lr": 0.5,
    }
    assert record["result"] == {"value": 42}
    prov = record["provenance"]
    assert prov["argv"] == ["experiments/x.py", "--version", "2026.11.30", "--run"]
    assert prov["user"] and prov["host"] and prov["time"]
    assert "git_commit" in prov
    status = records.read_status(path)
    assert status["state"] == "succeeded" and status["error"] is None
    assert records.is_succeeded(path)
    assert storage.read_text(storage.join(path, "out.txt")) == "models/tiny"


def test_status_is_running_while_the_step_runs(any_prefix):
    seen = []

    def run(config):
        seen.append(records.read_status(config["output_path"])["state"])
        seen.append(records.read_record(config["output_path"]))

    step = make_step("a", run=run)
    Runner(any_prefix, provenance=_provenance(), report=quiet([])).run([step])
    assert seen == ["running", None]
    assert records.read_status(step.path(any_prefix))["state"] == "succeeded"


def test_a_failed_step_gets_a_failed_status_and_no_record(any_prefix):
    step = make_step("a", fail=True)
    with pytest.raises(RunFailedError):
        Runner(any_prefix, provenance=_provenance(), report=quiet([])).run([step])
    path = step.path(any_prefix)
    status = records.read_status(path)
    assert status["state"] == "failed" and "boom in a" in status["error"]
    assert records.read_record(path) is None
    assert not records.is_succeeded(path)


def test_the_record_is_written_before_the_status_turns_succeeded(prefix, monkeypatch):
    writes = []
    real = storage.write_json_atomic

    def spy(url, obj):
        name = url.rsplit("/", 1)[-1]
        writes.append(name if name != ".status.json" else f"status:{obj['state']}")
        real(url, obj)

    monkeypatch.setattr(storage, "write_json_atomic", spy)
    Runner(prefix, provenance=_provenance(), report=quiet([])).run([make_step("a")])
    assert writes == ["status:running", ".artifact.json", "status:succeeded"]


def test_a_status_without_a_record_is_not_a_success(prefix):
    path = make_step("a").path(prefix)
    records.write_status(path, records.SUCCEEDED)
    assert not records.is_succeeded(path)


def test_provenance_names_the_git_commit(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], cwd=repo, check=True)
    (repo / "f.txt").write_text("x")
    subprocess.run([*git, "add", "f.txt"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], cwd=repo, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    monkeypatch.chdir(repo)
    prov = _provenance()
    assert prov.git_commit == head and prov.git_dirty is False
    (repo / "f.txt").write_text("changed")
    assert _provenance().git_dirty is True
    monkeypatch.chdir(tmp_path)  # not a repository
    assert _provenance().git_commit is None


def test_provenance_defaults_to_this_process_argv(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["prog", "--version", "dev"])
    assert Provenance.capture().argv == ("prog", "--version", "dev")


def test_argv_values_equal_to_a_credential_are_redacted(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijkl")
    monkeypatch.setenv("MY_SERVICE_SECRET", "s3cr3t-value")
    monkeypatch.setenv("PLAIN_SETTING", "plainvalue")
    argv = ["prog", "--token", "hf_abcdefghijkl", "--url=https://u:s3cr3t-value@host", "plainvalue"]
    assert redact_argv(argv) == ["prog", "--token", "<redacted>", "--url=https://u:<redacted>@host", "plainvalue"]


def test_credentials_never_reach_a_written_record(prefix, monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "wandb-key-123456")
    monkeypatch.setattr(sys, "argv", ["experiments/x.py", "--wandb-key", "wandb-key-123456", "--run"])
    step = make_step("a")
    Runner(prefix, report=quiet([])).run([step])
    text = storage.read_text(records.record_url(step.path(prefix)))
    assert "wandb-key-123456" not in text
    assert json.loads(text)["provenance"]["argv"] == ["experiments/x.py", "--wandb-key", "<redacted>", "--run"]
