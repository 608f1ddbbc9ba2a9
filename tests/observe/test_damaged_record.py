"""A damaged run record still reports: `rlaunch status` shows the damage and everything the other
durable state says (terminal manifest: state, step, export; job states; checkpoints), exits 1;
`rlaunch runs` lists the run as damaged; reading rewrites nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.launchers import Launcher

pytestmark = pytest.mark.launch

VERSION = "2026.11.30"
DAMAGED = b'{"run_id": "marker/rl", "attempts": [{"attempt_id": '  # a copy cut short


def tree(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file() and ".jobs" not in p.parts}


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Launcher, Path, dict]:
    """A finished marker run whose run_record.json was then damaged."""
    launcher = Launcher(tmp_path_factory.mktemp("damaged") / "prefix", {})
    done = launcher.run("-m", "tests.experiments.marker", "--version", VERSION, "--run")
    assert done.returncode == 0, done.stderr
    out = launcher.prefix / "marker" / "rl" / VERSION
    record = json.loads((out / "run_record.json").read_text())
    (out / "run_record.json").write_bytes(DAMAGED)
    return launcher, out, record["attempts"][-1]


def test_status_shows_the_damage_and_what_the_other_state_says(finished: tuple[Launcher, Path, dict]) -> None:
    launcher, out, attempt = finished
    before = tree(launcher.prefix)
    shown = launcher.run("-m", "rlaunch", "status", f"marker/rl@{VERSION}")
    assert shown.returncode == 1, shown.stderr
    text = shown.stdout
    assert "DAMAGED" in text and f"{out / 'run_record.json'} is damaged" in text and "move it aside" in text
    assert f"error: {out / 'run_record.json'} is damaged" in shown.stderr
    assert f"attempt {attempt['attempt_id']}" in text
    assert "state        succeeded" in text
    assert f"coordinator  {attempt['coordinator_job_id']}  succeeded" in text
    assert f"child        {attempt['child_job_id']}  succeeded" in text
    assert "checkpoints  kept [2, 4], latest 4" in text
    assert f"export       {out / 'exports' / 'global_step_4' / 'policy'}" in text
    assert f"terminal     succeeded  attempt {attempt['attempt_id']}  step 4" in text
    assert tree(launcher.prefix) == before  # nothing rewritten by reading


def test_status_json_carries_the_damage_and_the_smoke_verdict_fails(finished: tuple[Launcher, Path, dict]) -> None:
    launcher, out, attempt = finished
    shown = launcher.run("-m", "rlaunch", "status", f"marker/rl@{VERSION}", "--json")
    assert shown.returncode == 1
    data = json.loads(shown.stdout)
    assert "is damaged" in data["damage"] and data["attempt_id"] == attempt["attempt_id"]
    assert data["terminal"]["state"] == "succeeded" and data["checkpoints"]["steps"] == [2, 4]
    assert not data["smoke"]["ok"]
    verdict = launcher.run("-m", "rlaunch", "verify-smoke", f"marker/rl@{VERSION}")
    assert verdict.returncode == 1 and "the run record is damaged" in verdict.stdout
    assert (out / "run_record.json").read_bytes() == DAMAGED


def test_runs_lists_the_run_as_damaged(finished: tuple[Launcher, Path, dict]) -> None:
    launcher, out, attempt = finished
    listed = launcher.run("-m", "rlaunch", "runs")
    assert listed.returncode == 1
    (row,) = [line for line in listed.stdout.splitlines() if line.startswith(f"marker/rl@{VERSION}")]
    assert "damaged" in row and attempt["attempt_id"] in row and attempt["coordinator_job_id"] in row
    assert f"{out / 'run_record.json'} is damaged" in listed.stderr
    rows = json.loads(launcher.run("-m", "rlaunch", "runs", "--json").stdout)
    (row,) = [r for r in rows if r["artifact"] == f"marker/rl@{VERSION}"]
    assert row["state"] == "damaged" and "is damaged" in row["state_reason"]
    assert (out / "run_record.json").read_bytes() == DAMAGED
