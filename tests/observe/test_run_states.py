"""`rlaunch status` and `rlaunch verify-smoke` on real runs in every state a smoke can end in.

Each run went through the real path: coordinator job, launch host, child gang on the local
backend, task bootstrap (staging, join markers) and the registered `test-marker` trainer.
"""

from __future__ import annotations

import json

import pytest

from .conftest import RL, Runs
from .lab import FAKE_SECRET, Lab

pytestmark = pytest.mark.launch


def verdict(lab: Lab, run: str) -> tuple[int, dict[str, dict]]:
    result = lab.rlaunch("verify-smoke", run, "--json")
    data = json.loads(result.output)
    return result.exit_code, {c["name"]: c for c in data["criteria"]}


def failing(criteria: dict[str, dict]) -> dict[str, str]:
    return {name: c["evidence"] for name, c in criteria.items() if not c["ok"]}


def test_run_record_holds_ids_identity_digest_topology_and_no_credentials(lab: Lab, runs: Runs) -> None:
    record = lab.run_record(RL, runs.ok)
    assert record is not None and record["run_id"] == f"{RL}-{runs.ok}"
    (attempt,) = record["attempts"]
    assert attempt["state"] == "succeeded" and attempt["artifact"] == f"{RL}@{runs.ok}"
    assert attempt["coordinator_job_id"].startswith(f"marker-rl-{runs.ok}-coordinator-")
    assert attempt["child_job_id"].startswith(f"marker-rl-{runs.ok}-{attempt['attempt_id']}-")
    assert attempt["backend"] == "local" and attempt["runtime_profile"] == "test-marker"
    assert len(attempt["runtime_digest"]) == 64 and len(attempt["fingerprint"]) == 64
    assert attempt["topology"]["num_nodes"] == 1 and attempt["topology"]["role_plan"]["train_batch_size"] == 2
    assert attempt["submitted_at"] and attempt["finished_at"] and "--run" in attempt["argv"]
    for path in lab.output_path(RL, runs.ok).rglob("*.json"):
        assert FAKE_SECRET not in path.read_text(), f"a credential reached {path}"


def test_succeeded_run_shows_jobs_joins_model_steps_checkpoints_export_and_passes(lab: Lab, runs: Runs) -> None:
    s = lab.status(f"{RL}@{runs.ok}")
    record = lab.run_record(RL, runs.ok)["attempts"][-1]
    assert s["state"] == "succeeded" and s["is_terminal"] and s["attempt_id"] == record["attempt_id"]
    assert s["coordinator"]["job_id"] == record["coordinator_job_id"] and s["coordinator"]["state"] == "succeeded"
    assert s["child"]["job_id"] == record["child_job_id"] and [r["state"] for r in s["child"]["replicas"]] == [
        "succeeded"
    ]
    assert [j["rank"] for j in s["tasks"]["replicas"]] == [0] and s["tasks"]["replicas"][0]["time"]
    assert s["tasks"]["expected_trainer_processes"] == 1 and [j["rank"] for j in s["tasks"]["trainers"]] == [0]
    model = s["model"]
    assert model["configured"] == "models/model"
    assert model["configured_path"].startswith(str(lab.staging)) and model["configured_path"].endswith(
        "/replica-0/models/model"
    )
    assert model["loaded_path"] == model["configured_path"] and model["identity"] == model["expected_identity"]
    assert s["steps"]["latest_step"] == 4 and s["steps"]["final_step"] == 4 and s["steps"]["count"] == 4
    assert s["steps"]["steps_per_minute"] > 0 and s["steps"]["last"]["loss"] == 0.25
    assert s["checkpoints"]["latest_step"] == 4 and 4 in s["checkpoints"]["steps"]
    assert s["checkpoints"]["latest_meta"]["runtime_digest"] == record["runtime_digest"]
    assert s["export"]["present"] and s["export"]["uri"].endswith("/exports/global_step_4/policy")
    assert (
        s["terminal"]["exists"]
        and s["terminal"]["state"] == "succeeded"
        and s["terminal"]["attempt_id"] == s["attempt_id"]
    )
    code, criteria = verdict(lab, f"{RL}@{runs.ok}")
    assert code == 0 and not failing(criteria) and len(criteria) == 5


def test_succeeded_run_text_names_every_section(lab: Lab, runs: Runs) -> None:
    result = lab.rlaunch("status", f"{RL}@{runs.ok}")
    assert result.exit_code == 0
    for label in (
        "run",
        "state",
        "runtime",
        "topology",
        "coordinator",
        "child",
        "joined",
        "model",
        "steps",
        "checkpoints",
        "export",
        "terminal",
    ):
        assert any(line.split()[0] == label for line in result.output.splitlines() if line.strip()), label
    text = lab.rlaunch("verify-smoke", f"{RL}@{runs.ok}").output
    assert "PASS" in text.splitlines()[0] and text.count("[ok]") == 5


def test_run_failed_midway_shows_progress_and_fails_with_reasons(lab: Lab, runs: Runs) -> None:
    s = lab.status(f"{RL}@{runs.fail_at_3}")
    assert s["state"] == "failed" and "child job" in s["failure"] and s["child"]["state"] == "failed"
    assert s["child"]["replicas"][0]["exit_code"] == 3
    assert s["steps"]["latest_step"] == 2 and s["checkpoints"]["latest_step"] == 2 and not s["terminal"]["exists"]
    code, criteria = verdict(lab, f"{RL}@{runs.fail_at_3}")
    bad = failing(criteria)
    assert code == 1
    assert "state failed" in bad["run succeeded"] and "reached step 3" not in bad["run succeeded"]
    assert "reached step 2 of the configured final step 4" in bad["optimizer steps advance"]
    assert "no terminal manifest" in bad["terminal checkpoint/export metadata exists"]
    assert "all expected tasks joined" not in bad and "configured model-loading path active" not in bad


def test_run_without_optimizer_steps_fails_the_steps_criterion(lab: Lab, runs: Runs) -> None:
    s = lab.status(f"{RL}@{runs.no_steps}")
    assert s["state"] == "failed" and "terminal export failed" in s["failure"]
    assert s["model"]["recorded"] and s["steps"]["count"] == 0 and s["checkpoints"]["latest_step"] is None
    code, criteria = verdict(lab, f"{RL}@{runs.no_steps}")
    bad = failing(criteria)
    assert code == 1
    assert (
        "no optimizer step recorded" in bad["optimizer steps advance"]
        and "model was loaded" in bad["optimizer steps advance"]
    )
    assert "no checkpoint `latest` marker" in bad["terminal checkpoint/export metadata exists"]
    assert "configured model-loading path active" not in bad


def test_trainer_that_loaded_another_model_fails_although_the_run_succeeded(lab: Lab, runs: Runs) -> None:
    s = lab.status(f"{RL}@{runs.wrong_model}")
    assert s["state"] == "succeeded" and s["model"]["loaded_path"] == "/elsewhere/model"
    assert s["model"]["configured_path"].endswith("/models/model")
    code, criteria = verdict(lab, f"{RL}@{runs.wrong_model}")
    bad = failing(criteria)
    assert code == 1 and list(bad) == ["configured model-loading path active"]
    assert "loaded '/elsewhere/model' instead of the configured" in bad["configured model-loading path active"]
    text = lab.rlaunch("status", f"{RL}@{runs.wrong_model}").output
    assert "/elsewhere/model  (DIFFERS)" in text


def test_replica_that_never_joined_is_named_with_its_job_state(lab: Lab, runs: Runs) -> None:
    s = lab.status(f"{RL}@{runs.never_joined}")
    assert s["state"] == "failed" and s["tasks"]["expected_replicas"] == 2
    joined, missing = [j["rank"] for j in s["tasks"]["replicas"]], s["tasks"]["missing_replicas"]
    assert 1 in missing and sorted(joined + missing) == [0, 1]  # rank 0 may be stopped before it joins, too
    replica_1 = s["child"]["replicas"][1]
    assert replica_1["state"] == "failed" and replica_1["exit_code"] not in (0, None)
    code, criteria = verdict(lab, f"{RL}@{runs.never_joined}")
    bad = failing(criteria)
    assert code == 1
    assert "replicas joined; never joined: " in bad["all expected tasks joined"]
    assert "replica 1 (child job: failed, exit 1)" in bad["all expected tasks joined"]
    assert f"{len(joined)}/2 replicas joined" in bad["all expected tasks joined"]
