"""The coordinator trains exactly what was judged, on the local backend: a graph that reads a
variable its coordinator is not given is refused there before anything is built (the Ray tier:
tests/ray/test_ray_experiments.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.launchers import SMOKE_VERSION, checkout_launcher, replay_refused_through

pytestmark = pytest.mark.launch


def test_a_graph_built_from_an_unforwarded_variable_is_refused_by_its_coordinator(tmp_path: Path) -> None:
    launcher = checkout_launcher(tmp_path / "prefix", {})
    refusal = replay_refused_through(launcher, "local")

    # The same main without the variable builds in the coordinator what was judged: it trains, and
    # the refusal stays in the run record beside the attempt.
    done = launcher.run("-m", "tests.experiments.env_read", "--version", SMOKE_VERSION, "--run", timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((launcher.prefix / "marker" / "rl" / SMOKE_VERSION / "run_record.json").read_text())
    assert [a["state"] for a in record["attempts"]] == ["succeeded"] and record["replay_refusals"] == [refusal]
