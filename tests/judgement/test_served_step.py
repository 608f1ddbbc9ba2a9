"""Only what launches is judged: a served RL step (built, read from storage) is shown as served,
is not resumed and gates nothing downstream, even after its runtime changed."""

from __future__ import annotations

import json

import pytest

from tests.support.launchers import Launcher

DAY = "2026.11.30"
EXPERIMENT = ("-m", "tests.experiments.served_eval", "--version", DAY)
OTHER_RUNTIME = "f" * 64


def _as_if_the_runtime_changed(launcher: Launcher) -> None:
    """Every attempt and checkpoint of marker/rl now reads as another runtime's (a repin, or an
    rlaunch upgrade that changed the adapter)."""
    record_path = launcher.prefix / "marker/rl" / DAY / "run_record.json"
    record = json.loads(record_path.read_text())
    for attempt in record["attempts"]:
        attempt["runtime_digest"] = OTHER_RUNTIME
    record_path.write_text(json.dumps(record))
    metas = list((launcher.prefix / ".tmp").rglob("rlaunch_checkpoint.json"))
    assert metas, "the marker run wrote no checkpoint"
    for meta in metas:
        meta.write_text(json.dumps({**json.loads(meta.read_text()), "runtime_digest": OTHER_RUNTIME}))


@pytest.mark.e2e
def test_a_served_rl_step_is_not_resumed_and_gates_nothing_downstream(launcher: Launcher) -> None:
    built = launcher.run(*EXPERIMENT, "--stage", "rl", "--run")
    assert built.returncode == 0, built.stderr[-3000:]
    _as_if_the_runtime_changed(launcher)

    plan = launcher.run(*EXPERIMENT, "--stage", "evaluation")
    assert plan.returncode == 0, plan.stderr
    assert "served from storage" in plan.stdout and "nothing resumes" in plan.stdout
    assert "would resume" not in plan.stdout and "REFUSED" not in plan.stdout
    assert f"judgement of marker/rl@{DAY}: served from storage, nothing launches, nothing is judged" in plan.stdout
    as_json = launcher.run(*EXPERIMENT, "--stage", "evaluation", "--plan-format", "json")
    judged = json.loads(as_json.stdout)["judgement"]
    assert judged == {f"marker/rl@{DAY}": {"launches": False, "refused": False, "findings": []}}

    done = launcher.run(*EXPERIMENT, "--stage", "evaluation", "--run")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    report = json.loads((launcher.prefix / "marker/eval" / DAY / "report.json").read_text())
    assert report["policy"].endswith(f"marker/rl/{DAY}")
