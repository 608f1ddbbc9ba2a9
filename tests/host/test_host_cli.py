"""`rlaunch launch --config DOC`: the host on its own, fed documents a real launch wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.launchers import Launcher

pytestmark = pytest.mark.launch

VERSION = "2026.11.30"


@pytest.fixture
def finished_document(launcher: Launcher) -> dict:
    """The launch document of a finished marker run (its own terminal manifest already exists)."""
    done = launcher.run("-m", "tests.experiments.marker", "--version", VERSION, "--run")
    assert done.returncode == 0, done.stderr
    (path,) = launcher.prefix.glob(".tmp/*/marker/rl/*/attempts/*/launch.yaml")
    return yaml.safe_load(path.read_text())


def launch(launcher: Launcher, doc: dict, name: str) -> tuple[int, dict, str]:
    """Write `doc` as a fresh attempt and run the host on it; returns (exit code, result, stderr)."""
    doc["run"]["attempt_id"] = name
    doc["cluster"]["job_name"] = f"marker-rl-{name}"
    doc["artifacts"]["terminal_manifest_uri"] = str(launcher.prefix / f"{name}-terminal.json")
    path = launcher.prefix / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    done = launcher.run("-m", "rlaunch", "launch", "--config", str(path))
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1, f"stdout must be one JSON result, got {done.stdout!r}"
    return done.returncode, json.loads(lines[0]), done.stderr


def attempt_manifest(launcher: Launcher, attempt: str) -> dict:
    (path,) = launcher.prefix.glob(f".tmp/*/marker/rl/*/attempts/{attempt}.json")
    return json.loads(path.read_text())


def test_prepare_validates_and_builds_the_child_without_submitting(launcher: Launcher, finished_document: dict) -> None:
    jobs = len(launcher.backend().list_jobs())
    finished_document["run"]["submission"] = "prepare"
    code, result, stderr = launch(launcher, finished_document, "prepare1")
    assert code == 0 and result["state"] == "prepared" and result["child_job_id"] is None
    assert "prepared child job marker-rl-prepare1: 1 replica(s)" in stderr
    assert len(launcher.backend().list_jobs()) == jobs
    assert not (launcher.prefix / "prepare1-terminal.json").exists()


def test_detach_submits_and_returns_without_manifests(launcher: Launcher, finished_document: dict) -> None:
    finished_document["run"]["submission"] = "detach"
    code, result, _ = launch(launcher, finished_document, "detach1")
    assert code == 0 and result["state"] == "submitted" and result["child_job_id"]
    backend = launcher.backend()
    assert backend.wait(result["child_job_id"], timeout=120).state.value == "succeeded"
    assert not (launcher.prefix / "detach1-terminal.json").exists()
    record = json.loads((launcher.prefix / "marker" / "rl" / VERSION / "run_record.json").read_text())
    assert any(a["attempt_id"] == "detach1" and a["state"] == "running" for a in record["attempts"])


def test_wait_supervises_and_writes_attempt_and_terminal_manifests(launcher: Launcher, finished_document: dict) -> None:
    code, result, stderr = launch(launcher, finished_document, "wait1")
    assert code == 0 and result["state"] == "succeeded" and result["child_job_state"] == "succeeded"
    assert result["model"]["global_step"] == 4 and Path(result["model"]["policy_export_uri"]).is_dir()
    assert "[rlaunch.task rank 0] joined gang as rank 0 of 1" in stderr  # the child's log, streamed
    terminal = json.loads((launcher.prefix / "wait1-terminal.json").read_text())
    assert terminal == attempt_manifest(launcher, "wait1")
    assert terminal["result"]["state"] == "succeeded" and terminal["config"]["skyrl"]["trainer"]["seed"] == 7


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d["skyrl"]["trainer"].update(no_such_key=1), "skyrl.trainer.no_such_key"),
        (lambda d: d["skyrl"]["trainer"].update(train_batch_size="2"), "skyrl.trainer.train_batch_size"),
        (lambda d: d["cluster"]["allocation"].update(num_nodes=2), "[topology.gpu_budget] role plan describes 1 GPUs"),
        (lambda d: d["skyrl"]["trainer"].update(seed=8), "trainer.seed=8 disagrees with run.seed value 7"),
        (
            lambda d: d["runtime"].update(entrypoint="fully_async"),
            "[entrypoint.unknown] entrypoint 'fully_async' is not registered",
        ),
        (lambda d: d["runtime"].update(source_digest="0" * 64), "does not match runtime 'test-marker' installed here"),
    ],
)
def test_a_bad_document_fails_before_submission_naming_the_problem(
    launcher: Launcher, finished_document: dict, edit, expected: str
) -> None:
    jobs = len(launcher.backend().list_jobs())
    edit(finished_document)
    code, result, _ = launch(launcher, finished_document, "bad1")
    assert code == 2 and result["state"] == "failed" and expected in result["failure"]
    assert result["child_job_id"] is None and len(launcher.backend().list_jobs()) == jobs
    assert attempt_manifest(launcher, "bad1")["result"]["state"] == "failed"
    assert not (launcher.prefix / "bad1-terminal.json").exists()


def test_unknown_document_keys_are_refused_naming_the_path(launcher: Launcher, finished_document: dict) -> None:
    finished_document["run"]["color"] = "blue"
    code, result, _ = launch(launcher, finished_document, "bad2")
    assert code == 2 and result["state"] == "failed" and "run.color: unknown key" in result["failure"]


def test_a_checkpoint_of_another_runtime_digest_is_not_resumed(launcher: Launcher, finished_document: dict) -> None:
    root = Path(finished_document["artifacts"]["checkpoint_root"])
    (root / "global_step_9").mkdir(parents=True)
    (root / "global_step_9" / "rlaunch_checkpoint.json").write_text(json.dumps({"runtime_digest": "f" * 64}))
    (root / "latest").write_text("9")
    jobs = len(launcher.backend().list_jobs())
    code, result, _ = launch(launcher, finished_document, "foreign1")
    assert code == 2 and result["state"] == "failed" and "fresh RL artifact version" in result["failure"]
    assert len(launcher.backend().list_jobs()) == jobs
