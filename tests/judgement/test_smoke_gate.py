"""Gate 4, a smoke before every large launch: a launch on more nodes or GPUs than the thresholds
(default 1 node, 8 GPUs), whatever the accelerator, that declares no smoke is refused unless
`--skip-smoke-gate "<reason>"` is given, and the reason is kept in the run record. A declared smoke
is never large. The 64-GPU example declares its GPU smoke."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlaunch import storage
from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.cli.plan_text import step_lines
from rlaunch.judgement.judge import Authorisations, large, refusals
from rlaunch.skyrl import skyrl_step
from rlaunch.skyrl.plan import planning
from rlaunch.submission import Given, Invocation, prepare
from rlaunch.submission.smoke_override import record_override
from rlaunch.submission.submission import judged_launch as judgement
from tests.support import specs as h
from tests.support.launchers import Launcher

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


def _large(execution: object, *, is_smoke: bool = False, **shape: int) -> str | None:
    spec = h.spec(topo=h.topology(h.seed_plan(), num_nodes=8) if not shape else h.topology(**shape))
    step = skyrl_step(spec, execution, export_hf=True, is_smoke=is_smoke)  # type: ignore[arg-type]
    return large(h.launch_of(step))


def test_large_is_the_users_thresholds_whatever_the_accelerator(prefix: str) -> None:
    assert _large(h.iris()) == "it allocates 8 nodes (more than the smoke gate's threshold of 1)"
    assert _large(h.iris(smoke_gate_nodes=8)) == "it allocates 64 GPUs (more than the smoke gate's threshold of 8)"
    assert _large(h.iris(smoke_gate_nodes=8, smoke_gate_gpus=64)) is None  # at both thresholds
    assert _large(h.iris(), num_nodes=1, gpus_per_node=8) is None  # one GPU node: no longer large for being GPU
    assert _large(h.iris(), is_smoke=True) is None  # a declared smoke rehearses; it is never large


def test_the_64_gpu_example_waits_for_its_gpu_smoke_and_goes_only_with_a_recorded_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from experiments import rl_plan_example

    prefix = str(tmp_path / "prefix")
    monkeypatch.setenv("RLAUNCH_PREFIX", prefix)
    monkeypatch.setenv("WANDB_API_KEY", "set-for-its-logger")  # the example logs to W&B
    with build_context(BuildContext(VersionCodex(DAY))):
        step = rl_plan_example.rl_step(broken=False)
    assert step.smoke is not None and step.smoke.spec.runtime.profile == "fsdp"
    text = "\n".join(_describe(step))
    assert f"smoke gate: {step.smoke.identity}; the declared smoke {step.smoke.identity} has not run" in text
    assert "  as declared, it has this launch's shape" in text and "parity holds" not in text

    refused = refusals(judgement(h.launch_of(step, prefix), Authorisations()))
    assert refused == [
        f"smoke: the declared smoke {step.smoke.identity} has not run; launch it and check it with rlaunch verify-smoke"
    ]
    waived = judgement(h.launch_of(step, prefix), Authorisations(skip_smoke_gate=True))
    assert refusals(waived) == []
    invocation = Invocation(module="experiments.rl_plan_example", argv=(), version=DAY, max_concurrent=1, prefix=prefix)
    submission = prepare([step], invocation, Given(skip_smoke_gate="smoke ran on the staging cluster"))
    assert submission.smoke_overrides() == [(step, [f.message for f in waived if f.status == "waived"])]
    for overridden, found in submission.smoke_overrides():
        record_override(
            submission.planning.launch(overridden).document, overridden, "smoke ran on the staging cluster", found
        )
    record = json.loads((Path(prefix) / step.name / DAY / "run_record.json").read_text())
    (override,) = record["smoke_gate_overrides"]
    assert override["smoke"] == step.smoke.identity and override["reason"] == "smoke ran on the staging cluster"


def _describe(step) -> list[str]:  # noqa: ANN001 - a SkyRL step
    return step_lines(planning.plan([step], storage.default_prefix()), step)
