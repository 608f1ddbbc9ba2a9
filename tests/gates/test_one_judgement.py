"""One judgement, three callers: each gate case goes through the dry run, `--run` and the launch host
(`rlaunch launch --config` on the document `--run` would hand it), and all three find the same
words. The smoke's evidence is real storage read by verify-smoke's code: a smoke whose latest
attempt failed fails its verdict; a smoke that ran another shape breaks parity."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from rlaunch import storage
from rlaunch.cli import rl_build_options
from rlaunch.cli.rl_options import judgement
from rlaunch.host.cli import launch
from rlaunch.judgement.judge import Authorisations, refusals
from rlaunch.launch_config import schema
from rlaunch.runs.run_record import update_attempt
from rlaunch.skyrl import skyrl_step
from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep
from tests.skyrl.helpers import DAY, iris, launch_of, spec, topology

pytestmark = pytest.mark.usefixtures("signal_handlers")

GATES = ("version: ", "retry: ", "smoke: ", "calendar version: ", "credentials: ")
SMOKE = "checkpoints/gsm8k-grpo-smoke"
UNSET = "RLAUNCH_TEST_NEVER_SET_TOKEN"  # a declared credential no environment of the suite sets


def smoke_step(*, one_node: bool = False) -> SkyRLArtifactStep:
    """The rehearsal: the large run's shape under its own name (or one node of it), declared as a smoke."""
    shape = {"topo": topology()} if one_node else {}
    return skyrl_step(spec(name=SMOKE, **shape), iris(), export_hf=True, is_smoke=True)


def large_step(
    *,
    smoke: bool,
    version: str = DAY,
    one_node_smoke: bool = False,
    high_thresholds: bool = False,
    credential: str = "",
) -> SkyRLArtifactStep:
    """The seed's 64-GPU run (8 nodes x 8 H100); with high thresholds it is large only by its smoke."""
    execution = iris(smoke_gate_nodes=8, smoke_gate_gpus=64) if high_thresholds else iris()
    declared = smoke_step(one_node=one_node_smoke) if smoke or one_node_smoke else None
    credentials = (credential,) if credential else ()
    return skyrl_step(spec(version=version, credentials=credentials), execution, export_hf=True, smoke=declared)


@click.command()
@click.option("--smoke/--no-smoke", default=False)
@click.option("--one-node-smoke", is_flag=True)
@click.option("--high-thresholds", is_flag=True)
@click.option("--credential", default="")
@click.option("--rl-version", default=DAY)
@rl_build_options
def experiment(smoke: bool, one_node_smoke: bool, high_thresholds: bool, credential: str, rl_version: str) -> Any:
    return large_step(
        smoke=smoke,
        version=rl_version,
        one_node_smoke=one_node_smoke,
        high_thresholds=high_thresholds,
        credential=credential,
    )


def step_of(args: tuple[str, ...]) -> SkyRLArtifactStep:
    """The step `experiment` builds from `args` (its own options only)."""
    value = dict(zip(args, args[1:]))
    return large_step(
        smoke="--smoke" in args,
        version=value.get("--rl-version", DAY),
        one_node_smoke="--one-node-smoke" in args,
        high_thresholds="--high-thresholds" in args,
        credential=value.get("--credential", ""),
    )


def _earlier(step: SkyRLArtifactStep, prefix: str, **fields: Any) -> None:
    document = launch_of(step, prefix).document
    update_attempt(document.artifacts.output_path, document.run.id, "earlier", fields)


def _smoke_ran(prefix: str, state: str, edit: Callable[[dict[str, Any]], None] = lambda d: None) -> None:
    """A smoke attempt in storage, with the document it ran (as its RL step records them)."""
    document = launch_of(smoke_step(), prefix).document.to_dict()
    edit(document)
    url = storage.join(prefix, "smoke-handed.yaml")
    storage.write_text_atomic(url, schema.dumps(schema.from_dict(document)))
    update_attempt(document["artifacts"]["output_path"], document["run"]["id"], "smoke-1", {
        "state": state,
        "runtime_digest": document["runtime"]["source_digest"],
        "launch_document_uri": url,
    })  # fmt: skip


def _other_runtime(prefix: str) -> None:
    _earlier(large_step(smoke=False), prefix, state="succeeded", runtime_digest="f" * 64)


def _failed_before(prefix: str) -> None:
    step = large_step(smoke=False)
    _earlier(step, prefix, state="failed", runtime_digest=launch_of(step, prefix).document.runtime.source_digest)


def _no_export(document: dict[str, Any]) -> None:
    document["run"]["export_hf"] = False


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]
    setup: Callable[[str], None]
    expected: tuple[str, ...]  # each in some finding
    absent: tuple[str, ...] = ()  # in none


CASES = (
    Case("version", (), _other_runtime, ("version: attempt earlier", "smoke: this is a large launch")),
    Case("retry", (), _failed_before, ("retry: the latest attempt earlier failed", "smoke: this is a large launch")),
    Case("no-smoke", (), lambda p: None, ("smoke: this is a large launch (it allocates 8 nodes",)),
    Case("smoke-not-run", ("--smoke",), lambda p: None, (f"smoke: the declared smoke {SMOKE}@{DAY} has not run",)),
    Case(
        "smoke-fails-verify-smoke",
        ("--smoke",),
        lambda p: _smoke_ran(p, "failed"),
        (f"smoke: smoke {SMOKE}@{DAY} does not pass verify-smoke: run succeeded: state failed",),
        ("parity with",),  # the smoke ran the launch's shape
    ),
    Case(
        "smoke-differs-in-parity",
        ("--smoke",),
        lambda p: _smoke_ran(p, "succeeded", _no_export),
        (f"smoke: parity with smoke {SMOKE}@{DAY}: [export] export_hf: smoke False, large True",),
        ("run succeeded:",),  # it succeeded; the other criteria lack their files here
    ),
    Case(
        "mutable-version",
        ("--rl-version", "dev"),
        lambda p: None,
        ("smoke: this is a large launch", "calendar version: this is a large launch (it allocates 8 nodes"),
    ),
    Case("calendar-version", (), lambda p: None, ("smoke: this is a large launch",), ("calendar version",)),
    Case(
        "bigger-than-its-smoke",
        ("--one-node-smoke", "--high-thresholds", "--rl-version", "dev"),
        lambda p: None,
        (
            f"smoke: the declared smoke {SMOKE}@{DAY} has not run",
            f"calendar version: this is a large launch (it allocates 8 nodes (more than its smoke {SMOKE}@{DAY}: 1))",
        ),
        ("threshold",),  # within both thresholds: large by its smoke alone
    ),
    Case(
        "undeclared-credential",
        ("--credential", UNSET),
        lambda p: None,
        (f"credentials: the run declares credential(s) it needs that this environment lacks: {UNSET} (not set)",),
    ),
)


def _dry_run(args: tuple[str, ...]) -> list[str]:
    done = CliRunner().invoke(experiment, ["--version", DAY, *args])
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("judgement of checkpoints/gsm8k-grpo@"))
    assert lines[-1] == "  --run would submit nothing"
    return [line.removeprefix("  refused: ") for line in lines[start + 1 : -1]]


def _json_dry_run(args: tuple[str, ...], identity: str) -> list[str]:
    """The refusing findings `--plan-format json` carries for `identity` (it refuses, so it launches)."""
    done = CliRunner().invoke(experiment, ["--version", DAY, *args, "--plan-format", "json"])
    assert done.exit_code == 0, done.output
    judged = json.loads(done.stdout)["judgement"][identity]
    assert judged["launches"] and judged["refused"]
    return [f"{f['gate']}: {f['message']}" for f in judged["findings"] if f["status"] == "refused"]


def _run(args: tuple[str, ...], identity: str) -> list[str]:
    done = CliRunner().invoke(experiment, ["--version", DAY, *args, "--run"])
    assert done.exit_code == 2, done.output
    assert "Nothing was submitted." in done.stderr
    lines = [line.removeprefix(f"error: {identity}: ") for line in done.stderr.splitlines()]
    return [line for line in lines if line.startswith(GATES)]


def _handed(step: SkyRLArtifactStep, prefix: str) -> Path:
    """The document `--run` would hand the host, written where `rlaunch launch --config` reads it."""
    document = launch_of(step, prefix).document.to_dict()
    document["run"]["attempt_id"] = "by-hand"
    document["run"]["submission"] = "prepare"
    path = Path(prefix).parent / "handed.yaml"
    path.write_text(schema.dumps(schema.from_dict(document)))
    return path


def _host(step: SkyRLArtifactStep, prefix: str) -> tuple[list[str], dict[str, Any]]:
    path = _handed(step, prefix)
    done = CliRunner().invoke(launch, ["--config", str(path)])
    assert done.exit_code == 2, done.output
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["failure"].splitlines(), result


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_dry_run_run_and_the_host_find_the_same_words(case: Case, prefix: str) -> None:
    case.setup(prefix)
    step = step_of(case.args)
    planned = _dry_run(case.args)
    assert all(line.startswith(GATES) for line in planned), planned
    assert all(any(f in line for line in planned) for f in case.expected), planned
    assert not any(f in line for f in case.absent for line in planned), planned
    assert _json_dry_run(case.args, step.identity) == planned
    assert _run(case.args, step.identity) == planned
    host, result = _host(step, prefix)
    assert host == planned
    assert result["state"] == "failed"


def test_a_skipped_smoke_gate_waives_the_smoke_findings_alone(prefix: str) -> None:
    _other_runtime(prefix)
    done = CliRunner().invoke(experiment, ["--version", DAY, "--skip-smoke-gate", "rehearsed by hand"])
    assert done.exit_code == 0, done.output
    assert "  refused: version: attempt earlier" in done.stdout
    assert "  waived: smoke: this is a large launch (it allocates 8 nodes" in done.stdout
    done = CliRunner().invoke(experiment, ["--version", DAY, "--skip-smoke-gate", "why", "--plan-format", "json"])
    (judged,) = json.loads(done.stdout)["judgement"].values()
    assert [(f["gate"], f["status"]) for f in judged["findings"]] == [("version", "refused"), ("smoke", "waived")]


def test_a_mutable_version_is_a_note_for_a_smoke_and_refuses_nothing(prefix: str) -> None:
    smoke = skyrl_step(spec(name=SMOKE, version="dev"), iris(), export_hf=True, is_smoke=True)
    findings = judgement(launch_of(smoke, prefix), Authorisations())
    assert [f.status for f in findings] == ["note"] and refusals(findings) == []
    assert findings[0].line().startswith("calendar version: the mutable version 'dev' is rebuilt on every run")


def test_the_host_plans_the_document_it_is_handed_once(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation, composition, the judgement and the run record's memory table read one
    `PlannedLaunch`: the host composes the recipe once and builds its geometry once."""
    from rlaunch.launch_config.geometry import Geometry
    from rlaunch.runtimes.registry import RuntimeProfile

    _failed_before(prefix)  # refused by the retry gate, after every reading of the document
    step = large_step(smoke=False)
    path, expected = _handed(step, prefix), launch_of(step, prefix).memory.as_dict()
    composed: list[str] = []
    geometries: list[str] = []
    real_compose, real_geometry = RuntimeProfile.compose, Geometry.from_recipe.__func__  # type: ignore[attr-defined]

    def compose(self: RuntimeProfile, recipe: Any) -> Any:
        composed.append(self.name)
        return real_compose(self, recipe)

    def geometry(cls: type[Geometry], recipe: Any) -> Geometry:
        geometries.append(cls.__name__)
        return real_geometry(cls, recipe)

    monkeypatch.setattr(RuntimeProfile, "compose", compose)
    monkeypatch.setattr(Geometry, "from_recipe", classmethod(geometry))
    done = CliRunner().invoke(launch, ["--config", str(path)])
    assert done.exit_code == 2, done.output
    assert json.loads(done.stdout.strip().splitlines()[-1])["failure"].startswith("retry: the latest attempt earlier")
    record = json.loads((Path(prefix) / "checkpoints/gsm8k-grpo" / DAY / "run_record.json").read_text())
    (refused,) = [a for a in record["attempts"] if a["attempt_id"] == "by-hand"]
    assert refused["memory"] == expected  # the run record's table is the planned launch's
    assert composed == ["fsdp"] and len(geometries) == 1, (composed, geometries)


@click.command()
@click.option("--stage", type=click.Choice(["rl", "evaluation"]), default="evaluation")
@click.option("--gpus", type=int, default=64)
@rl_build_options
def staged(stage: str, gpus: int) -> Any:
    """A main whose terminal stage has a default; `--gpus 8` makes its run a small one (one node)."""
    if gpus == 8:
        return skyrl_step(spec(topo=topology(), name=SMOKE, version=DAY), iris(), export_hf=True, is_smoke=True)
    return large_step(smoke=False)


@pytest.mark.parametrize(
    ("args", "refused"),
    [((), True), (("--stage", "evaluation"), False), (("--gpus", "8"), False)],
    ids=["large-default-stage", "large-chosen-stage", "smoke-default-stage"],
)
def test_a_large_launch_whose_terminal_stage_came_from_its_default_is_refused(
    prefix: str, args: tuple[str, ...], refused: bool
) -> None:
    """The seed: choose the terminal stage explicitly; a default stage may add downstream GPU work. The
    same value chosen on the command line goes; a small launch is only noted."""
    line = "  refused: stage: this is a large launch (it allocates 8 nodes"
    plan = CliRunner().invoke(staged, ["--version", DAY, "--skip-smoke-gate", "by hand", *args])
    assert plan.exit_code == 0, plan.output
    assert (line in plan.stdout) is refused, plan.stdout
    assert ("--stage evaluation (choose it with --stage rl|evaluation)" in plan.stdout) is refused
    run = CliRunner().invoke(staged, ["--version", DAY, "--skip-smoke-gate", "by hand", *args, "--run"])
    assert ("stage: this is a large launch" in run.output) is refused, run.output
    if refused:
        assert run.exit_code == 2 and "Nothing was submitted." in run.output
