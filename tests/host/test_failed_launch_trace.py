"""A launch that fails after the host wrote the resolved document still leaves its trace:
the attempt manifest and the run-record entry, with the failure, which `rlaunch status` shows."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.support.launchers import Launcher

pytestmark = pytest.mark.launch

VERSION = "2026.11.30"


def test_a_host_failure_after_the_resolved_document_is_recorded(launcher: Launcher) -> None:
    done = launcher.run("-m", "tests.experiments.marker", "--version", VERSION, "--run")
    assert done.returncode == 0, done.stderr
    (path,) = launcher.prefix.glob(".tmp/*/marker/rl/*/attempts/*/launch.yaml")
    doc = yaml.safe_load(path.read_text())
    doc["run"]["attempt_id"] = "nofit1"
    doc["cluster"]["job_name"] = "marker-rl-nofit1"
    doc["artifacts"]["terminal_manifest_uri"] = str(launcher.prefix / "nofit1-terminal.json")
    document = launcher.prefix / "nofit1.yaml"
    document.write_text(yaml.safe_dump(doc))

    # The machine shrank between the preflight and the launch: the child gang no longer fits.
    failed = launcher.run("-m", "rlaunch", "launch", "--config", str(document), env={"RLAUNCH_LOCAL_CPUS": "0.5"})
    assert failed.returncode in (1, 2), failed.stderr
    assert "Traceback" not in failed.stderr
    result = json.loads(failed.stdout.strip().splitlines()[-1])
    assert result["state"] == "failed" and "CPU" in result["failure"]
    assert result["resolved_config_uri"] and (launcher.prefix / "nofit1-terminal.json").exists() is False

    (manifest,) = launcher.prefix.glob(".tmp/*/marker/rl/*/attempts/nofit1.json")
    assert json.loads(manifest.read_text())["result"]["failure"] == result["failure"]
    record = json.loads((launcher.prefix / "marker" / "rl" / VERSION / "run_record.json").read_text())
    entry = next(a for a in record["attempts"] if a["attempt_id"] == "nofit1")
    assert entry["state"] == "failed" and entry["failure"] == result["failure"]

    status = launcher.run("-m", "rlaunch", "status", f"marker/rl@{VERSION}", "--attempt", "nofit1", "--json")
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert shown["state"] == "failed" and "CPU" in shown["failure"]


def test_a_document_carrying_a_credential_is_refused_and_recorded_without_it(launcher: Launcher) -> None:
    done = launcher.run("-m", "tests.experiments.marker", "--version", VERSION, "--run")
    assert done.returncode == 0, done.stderr
    (path,) = launcher.prefix.glob(".tmp/*/marker/rl/*/attempts/*/launch.yaml")
    doc = yaml.safe_load(path.read_text())
    token = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYzAbCdEfGh"
    doc["run"]["attempt_id"] = "secret1"
    doc["cluster"]["job_name"] = "marker-rl-secret1"
    doc["inputs"]["model"]["tokenizer_revision"] = token
    doc["artifacts"]["terminal_manifest_uri"] = str(launcher.prefix / "secret1-terminal.json")
    document = launcher.prefix.parent / "secret1.yaml"  # the input itself lies outside the prefix
    document.write_text(yaml.safe_dump(doc))

    refused = launcher.run("-m", "rlaunch", "launch", "--config", str(document))
    assert refused.returncode != 0
    result = json.loads(refused.stdout.strip().splitlines()[-1])
    assert (
        result["state"] == "failed"
        and "inputs.model.tokenizer_revision carries a Hugging Face token" in (result["failure"])
    )
    assert token not in refused.stdout + refused.stderr
    written = [p for p in launcher.prefix.rglob("*") if p.is_file()]
    assert any(p.name == "secret1.json" for p in written)  # the attempt manifest of the refusal
    for written_file in written:
        assert token.encode() not in written_file.read_bytes(), written_file
