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
from rlaunch.artifacts import resolve_version
from rlaunch.artifacts.versions import current_build_context
from rlaunch.cli import rl_build_options
from rlaunch.host.cli import launch
from rlaunch.judgement.judge import Authorisations, refusals
from rlaunch.launch_config import schema
from rlaunch.runs import layout
from rlaunch.runs.run_record import update_attempt
from rlaunch.skyrl import ResumeFrom, skyrl_step
from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep
from rlaunch.submission.submission import judged_launch as judgement
from tests.support.compositions import counted_compositions
from tests.support.specs import DAY, WANDB_RECIPE, iris, launch_of, spec, topology

pytestmark = pytest.mark.usefixtures("signal_handlers")

GATES = ("version: ", "retry: ", "smoke: ", "calendar version: ", "credentials: ", "resume: ", "large: ", "backend: ")
SMOKE = "checkpoints/gsm8k-grpo-smoke"
UNSET = "RLAUNCH_TEST_NEVER_SET_TOKEN"  # a declared credential no environment of the suite sets
WRITTEN, OTHER = "a" * 64, "b" * 64  # the runtime digest a pinned checkpoint records, and another


def smoke_step(*, one_node: bool = False) -> SkyRLArtifactStep:
    """The rehearsal: the large run's shape under its own name (or one node of it), declared as a smoke."""
    shape = {"topo": topology()} if one_node else {}
    return skyrl_step(spec(name=SMOKE, **shape), iris(), export_hf=True, is_smoke=True)


def pin_root() -> str:
    """Another version's checkpoint root, which `--pin DIGEST` pins step 2 of."""
    return storage.join(storage.default_prefix(), "old-version", "checkpoints")


def large_step(
    *,
    smoke: bool,
    version: str | None = None,
    one_node_smoke: bool = False,
    high_thresholds: bool = False,
    credential: str = "",
    wandb: bool = False,
    pin: str = "",
    declared_smoke: bool = False,
) -> SkyRLArtifactStep:
    """The seed's 64-GPU run (8 nodes x 8 H100); with high thresholds it is large only by its smoke;
    `wandb` logs to W&B; `pin` starts from step 2 of another root, pinned to that digest;
    `declared_smoke` declares it a smoke though it has the large run's size."""
    execution = iris(smoke_gate_nodes=8, smoke_gate_gpus=64) if high_thresholds else iris()
    declared = smoke_step(one_node=one_node_smoke) if smoke or one_node_smoke else None
    values: dict[str, Any] = {"credentials": (credential,) if credential else ()}
    values |= {"tree": WANDB_RECIPE} if wandb else {}
    values |= {"resume_from": ResumeFrom(pin_root(), 2, pin)} if pin else {}
    if version is None:  # the run-wide --version inside a main, else the day of the earlier attempts
        version = resolve_version("checkpoints/gsm8k-grpo", None) if current_build_context() else DAY
    return skyrl_step(
        spec(version=version, **values), execution, export_hf=True, smoke=declared, is_smoke=declared_smoke
    )


@click.command()
@click.option("--smoke/--no-smoke", default=False)
@click.option("--one-node-smoke", is_flag=True)
@click.option("--high-thresholds", is_flag=True)
@click.option("--credential", default="")
@click.option("--rl-version", default=None)
@click.option("--wandb", is_flag=True)
@click.option("--pin", default="")
@click.option("--declared-smoke", is_flag=True)
@rl_build_options
def experiment(
    smoke: bool,
    one_node_smoke: bool,
    high_thresholds: bool,
    credential: str,
    rl_version: str | None,
    wandb: bool,
    pin: str,
    declared_smoke: bool,
) -> Any:
    return large_step(
        smoke=smoke,
        version=rl_version,
        one_node_smoke=one_node_smoke,
        high_thresholds=high_thresholds,
        credential=credential,
        wandb=wandb,
        pin=pin,
        declared_smoke=declared_smoke,
    )


def step_of(args: tuple[str, ...]) -> SkyRLArtifactStep:
    """The step `experiment` builds from `args` (its own options only)."""
    value = dict(zip(args, args[1:]))
    return large_step(
        smoke="--smoke" in args,
        version=value.get("--rl-version") or value.get("--version") or DAY,
        one_node_smoke="--one-node-smoke" in args,
        high_thresholds="--high-thresholds" in args,
        credential=value.get("--credential", ""),
        wandb="--wandb" in args,
        pin=value.get("--pin", ""),
        declared_smoke="--declared-smoke" in args,
    )


def _pinned_checkpoint(prefix: str) -> None:
    """Step 2 of another version's root, written under runtime digest WRITTEN."""
    meta = {"global_step": 2, "runtime_digest": WRITTEN, "run_fingerprint": "f" * 64}
    storage.write_json_atomic(storage.join(layout.checkpoint_dir(pin_root(), 2), layout.CHECKPOINT_META), meta)


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
    Case(
        "logger-credential",
        ("--wandb",),
        lambda p: None,
        (
            "credentials: trainer.logger is 'wandb', which needs WANDB_API_KEY (not set) here. Set it in the environment",
        ),
    ),
    Case(
        "resume-pin",
        ("--pin", OTHER),
        _pinned_checkpoint,
        (
            f"resume: resume_from pins {{root}}/global_step_2 as written by runtime digest {OTHER}, but it was written by "
            f"{WRITTEN}; pin the digest",
        ),
    ),
    Case(
        "declared-small",
        ("--declared-smoke",),
        lambda p: None,
        (
            "large: it is declared a smoke (is_smoke=True), yet it allocates 8 nodes (more than the default threshold "
            'of 1): a launch declared small must say why: pass --waive large="<reason>"',
        ),
        ("smoke: ",),  # declared small, it needs no smoke of its own
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
    expected = [f.replace("{root}", pin_root()) for f in case.expected]
    assert all(any(f in line for line in planned) for f in expected), planned
    assert not any(f in line for f in case.absent for line in planned), planned
    assert _json_dry_run(case.args, step.identity) == planned
    before = sorted(Path(prefix).rglob("*"))
    assert _run(case.args, step.identity) == planned
    assert sorted(Path(prefix).rglob("*")) == before  # a refused --run writes nothing (no probe, no .tmp/)
    host, result = _host(step, prefix)
    # The submitter's backend client (iris needs Python >= 3.12) is the submitter's finding: the host
    # runs inside a job of that backend, where its client is there by construction.
    assert host == [line for line in planned if not line.startswith("backend: ")]
    assert result["state"] == "failed"


@dataclasses.dataclass(frozen=True)
class Remedy:
    """What a refusal of `case` advises, followed verbatim: the words it says, and the arguments or
    environment that do what they say."""

    case: str
    gate: str
    said: str  # in the refusal: the advice
    args: tuple[str, ...] = ()  # added to the case's arguments
    env: tuple[tuple[str, str], ...] = ()


REMEDIES = (
    Remedy("version", "version", "Launch a new version (--version", ("--version", "2026.12.02")),
    Remedy("retry", "retry", 'pass --retry "<reason>"', ("--retry", "the node was replaced")),
    Remedy("no-smoke", "smoke", 'or pass --skip-smoke-gate "<reason>"', ("--skip-smoke-gate", "rehearsed by hand")),
    Remedy("mutable-version", "calendar version", "(--version YYYY.MM.DD)", ("--rl-version", "2026.12.03")),
    Remedy("undeclared-credential", "credentials", "Set each in the environment you launch from", env=((UNSET, "x"),)),
    Remedy(
        "logger-credential", "credentials", "Set it in the environment you launch from", env=(("WANDB_API_KEY", "x"),)
    ),
    Remedy("resume-pin", "resume", "pin the digest its rlaunch_checkpoint.json records", ("--pin", WRITTEN)),
    Remedy("declared-small", "large", 'pass --waive large="<reason>"', ("--waive", "large=a throughput test")),
)


def _refusing(args: tuple[str, ...]) -> list[str]:
    """The refusing findings of the JSON dry run, every gated step's."""
    done = CliRunner().invoke(experiment, ["--version", DAY, *args, "--plan-format", "json"])
    assert done.exit_code == 0, done.output
    judged = json.loads(done.stdout)["judgement"].values()
    return [f"{f['gate']}: {f['message']}" for j in judged for f in j["findings"] if f["status"] == "refused"]


@pytest.mark.parametrize("remedy", REMEDIES, ids=[r.case for r in REMEDIES])
def test_each_refusals_advice_followed_verbatim_lets_that_gate_go(
    remedy: Remedy, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (case,) = [c for c in CASES if c.name == remedy.case]
    case.setup(prefix)
    refused = [line for line in _refusing(case.args) if line.startswith(f"{remedy.gate}: ")]
    assert refused and all(remedy.said in line for line in refused), refused
    for name, value in remedy.env:
        monkeypatch.setenv(name, value)
    after = _refusing((*case.args, *remedy.args))
    assert not [line for line in after if line.startswith(f"{remedy.gate}: ")], after


def test_a_skipped_smoke_gate_waives_the_smoke_findings_alone(prefix: str) -> None:
    _other_runtime(prefix)
    done = CliRunner().invoke(experiment, ["--version", DAY, "--skip-smoke-gate", "rehearsed by hand"])
    assert done.exit_code == 0, done.output
    assert "  refused: version: attempt earlier" in done.stdout
    assert "  waived: smoke: this is a large launch (it allocates 8 nodes" in done.stdout
    done = CliRunner().invoke(experiment, ["--version", DAY, "--skip-smoke-gate", "why", "--plan-format", "json"])
    (judged,) = json.loads(done.stdout)["judgement"].values()
    assert [(f["gate"], f["status"]) for f in judged["findings"] if f["gate"] != "backend"] == [
        ("version", "refused"),
        ("smoke", "waived"),
    ]


def test_a_mutable_version_is_a_note_for_a_smoke_and_refuses_nothing(prefix: str) -> None:
    smoke = skyrl_step(spec(name=SMOKE, version="dev", topo=topology()), iris(), export_hf=True, is_smoke=True)
    findings = judgement(launch_of(smoke, prefix), Authorisations())
    assert [f.status for f in findings] == ["note"] and refusals(findings) == []
    assert findings[0].line().startswith("calendar version: the mutable version 'dev' is rebuilt on every run")


def test_the_host_plans_the_document_it_is_handed_once(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Validation, composition, the judgement and the run record's memory table read one
    `PlannedLaunch`: the host composes the recipe once and builds its geometry once."""
    _failed_before(prefix)  # refused by the retry gate, after every reading of the document
    step = large_step(smoke=False)
    path, expected = _handed(step, prefix), launch_of(step, prefix).memory.as_dict()
    composed, geometries = counted_compositions(monkeypatch)
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
