"""Gate 4, a smoke before every large launch: a launch on a GPU runtime, or on more nodes than the
threshold (default 1), that declares no smoke is refused unless `--skip-smoke-gate "<reason>"` is
given, and the reason is kept in the run record. The 64-GPU example declares its GPU smoke."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.cli.experiment import Invocation
from rlaunch.cli.rl_options import _record_overrides, _smoke_gate
from rlaunch.launch_config.gates import large_launch
from rlaunch.skyrl import LocalSkyRLExecution
from rlaunch.skyrl.gate_checks import large
from tests.launching import Launcher
from tests.skyrl import helpers as h

DAY = "2026.11.30"
MARKER = ("-m", "tests.experiments.marker", "--version", DAY, "--replicas", "2")


@pytest.mark.e2e
def test_a_two_node_launch_without_a_smoke_is_refused_and_goes_with_a_recorded_reason(launcher: Launcher) -> None:
    plan = launcher.run(*MARKER)
    assert "smoke gate: REQUIRED, none declared" in plan.stdout
    refused = launcher.run(*MARKER, "--run")
    assert refused.returncode == 2
    assert "large launch (it allocates 2 nodes (more than the smoke gate's threshold of 1))" in refused.stderr
    assert "Nothing was submitted." in refused.stderr
    assert not (launcher.prefix / ".jobs").exists() or launcher.backend().list_jobs() == []

    done = launcher.run(*MARKER, "--run", "--skip-smoke-gate", "the gang itself is under test")
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((launcher.prefix / "marker/rl" / DAY / "run_record.json").read_text())
    (override,) = record["smoke_gate_overrides"]
    assert override["reason"] == "the gang itself is under test" and override["smoke"] is None
    assert any("declares no smoke" in p for p in override["problems"]) and override["by"]["user"]
    (attempt,) = record["attempts"]
    assert attempt["skip_smoke_gate"]["reason"] == "the gang itself is under test"  # what the host was handed


def test_the_threshold_is_the_users_and_a_gpu_runtime_is_always_large() -> None:
    assert large_launch("cpu", 2, LocalSkyRLExecution().smoke_gate_nodes) is not None  # default: one node
    assert large_launch("cpu", 2, LocalSkyRLExecution(smoke_gate_nodes=2).smoke_gate_nodes) is None
    assert large_launch("cpu", 1, 1) is None  # the CPU smoke needs no smoke
    one_gpu_node = h.spec(topo=h.topology(num_nodes=1, gpus_per_node=8))
    assert large(h.planned_view(one_gpu_node, h.iris(smoke_gate_nodes=8))[0]) == "it runs on a GPU runtime"
    assert large_launch("gpu", 2, 1, rehearsal=True) is None  # a rehearsal runtime never trains


def test_the_64_gpu_example_waits_for_its_gpu_smoke_and_goes_only_with_a_recorded_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments import rl_plan_example

    prefix = str(tmp_path / "prefix")
    monkeypatch.setenv("RLAUNCH_PREFIX", prefix)
    with build_context(BuildContext(VersionCodex(DAY))):
        step = rl_plan_example.rl_step(broken=False)
    assert step.smoke is not None and step.smoke.spec.runtime.profile == "fsdp"
    text = "\n".join(_describe(step))
    assert f"smoke gate: {step.smoke.identity}; parity holds" in text
    assert f"smoke run: waiting: the declared smoke {step.smoke.identity} has not run" in text

    def invocation(**options: str) -> Invocation:
        return Invocation(module=None, argv=(), version=DAY, max_concurrent=1, prefix=prefix, options=options)

    refused, overrides = _smoke_gate([step], invocation())
    assert overrides == [] and any("has not run" in p for p in refused)
    refused, overrides = _smoke_gate([step], invocation(skip_smoke_gate="smoke ran on the staging cluster"))
    assert refused == []
    _record_overrides(overrides, invocation(skip_smoke_gate="smoke ran on the staging cluster"))
    record = json.loads((Path(prefix) / step.name / DAY / "run_record.json").read_text())
    (override,) = record["smoke_gate_overrides"]
    assert override["smoke"] == step.smoke.identity and override["reason"] == "smoke ran on the staging cluster"


def _describe(step) -> list[str]:  # noqa: ANN001 - a SkyRL step
    from rlaunch import storage

    return step.describe(storage.default_prefix())
