"""The coordinator trains exactly what was judged, in process: `--run` hands its coordinator the
graph it judged ($RLAUNCH_JUDGED in the job's environment), and a coordinator (`$RLAUNCH_JOB_ID`
set) whose replay of the main builds another graph, or that was handed none, refuses before the
runner builds anything. The whole path on the local backend and on Ray:
tests/launch/test_replay_refused.py, tests/ray/test_ray_experiments.py."""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from rlaunch.artifacts.judged import JUDGED_ENV, from_env, judged, to_env
from rlaunch.artifacts.step import graph_handles
from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.cluster.protocol import JOB_ID_ENV
from rlaunch.submission import submission
from tests.experiments.env_read import STEPS_ENV
from tests.experiments.marker import marker_rl
from tests.submission.test_submit_coordinator import Scripted
from tests.support.runtime_registry import isolated_runtime_registry

VERSION = "2026.12.07"
RUN = f"marker/rl@{VERSION}"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def main(prefix: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Runs `tests.experiments.env_read --version VERSION --run` in this process with `env` added."""
    from tests.experiments import env_read

    with isolated_runtime_registry():
        monkeypatch.setenv("RLAUNCH_RUNTIME_PLUGINS", "tests.plugins.marker_runtime")
        monkeypatch.delenv(STEPS_ENV, raising=False)

        def run(env: dict[str, str]) -> Result:
            argv = ["--version", VERSION, "--run"]
            monkeypatch.setattr(sys, "argv", ["env_read", *argv])
            return CliRunner().invoke(env_read.main, argv, env=env)

        yield run


def marker_graph(steps: int) -> list[Any]:
    with build_context(BuildContext(VersionCodex(VERSION))):
        return [marker_rl(steps=steps)]


def test_the_coordinator_job_carries_the_graph_judged_and_the_variables_it_read(
    main: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = Scripted()
    monkeypatch.setattr(submission, "get_backend", lambda name, **options: backend.named(name, options))
    done = main({STEPS_ENV: "6"})
    assert done.exit_code == 0, done.output
    assert backend.spec is not None
    carried = from_env(backend.spec.env)
    graph = graph_handles(marker_graph(6))
    assert [(s.identity, s.fingerprint) for s in carried.steps] == [(s.identity, s.fingerprint) for s in graph]
    assert (STEPS_ENV, sha("6")) in carried.env_reads
    assert STEPS_ENV not in backend.spec.env  # the value stays behind: the coordinator must not get it


def test_a_coordinator_whose_replay_built_another_graph_refuses_before_building_anything(
    main: Any, prefix: str
) -> None:
    submitted, replayed = graph_handles(marker_graph(6))[-1], graph_handles(marker_graph(4))[-1]
    env = {JOB_ID_ENV: "coordinator-1", **to_env(judged([submitted], {STEPS_ENV: sha("6")}))}
    done = main(env)
    assert done.exit_code == 2, done.output
    assert done.stderr.splitlines() == [
        "error: this coordinator's replay of tests.experiments.env_read is not the graph that was judged:",
        f"  {RUN}: judged with fingerprint {submitted.fingerprint}, but the coordinator's replay built fingerprint "
        f"{replayed.fingerprint}; the first field that differs is "
        "config.launch_document.skyrl.trainer.max_training_steps (6 judged, 4 replayed)",
        f"  the graph read ${STEPS_ENV} while it was built, and it is unset in the coordinator",
        "  fix: forward each variable the graph reads to the coordinator (env_passthrough on the execution or on "
        "the runtime profile), or stop reading the environment in the graph; then --run again",
        "Nothing was built.",
    ]
    assert done.stdout == ""  # not even "Running 1 terminal step(s)"
    assert sorted(p.name for p in Path(prefix).iterdir()) == ["marker"]
    assert [p.name for p in (Path(prefix) / "marker").iterdir()] == ["rl"]  # its inputs were not built
    record = json.loads((Path(prefix) / "marker" / "rl" / VERSION / "run_record.json").read_text())
    (refusal,) = record["replay_refusals"]
    assert refusal["coordinator_job_id"] == "coordinator-1" and record["attempts"] == []
    assert refusal["steps"] == [
        {
            "identity": RUN,
            "judged": submitted.fingerprint,
            "replayed": replayed.fingerprint,
            "field": "config.launch_document.skyrl.trainer.max_training_steps",
        }
    ]


def test_a_coordinator_handed_nothing_judged_refuses_before_building_anything(main: Any, prefix: str) -> None:
    done = main({JOB_ID_ENV: "coordinator-1", JUDGED_ENV: ""})
    assert done.exit_code == 2, done.output
    assert done.stderr.splitlines()[-1] == (
        "error: $RLAUNCH_JUDGED is not set, so this coordinator cannot know which graph was judged; submit it with "
        "`python -m <experiment> ... --run`, which judges the graph first"
    )
    assert list(Path(prefix).glob("*")) == []
