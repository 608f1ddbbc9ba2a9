"""`build_options`: the experiment command line, through click's CliRunner and real processes."""

from __future__ import annotations

import importlib
import json
import os
import pathlib
import re
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import Any

import click
import pytest
from click.testing import CliRunner

from rlaunch import storage
from rlaunch.artifacts import Artifact, ArtifactStep, Directory, records, resolve_version
from rlaunch.cli import build_options

REPO = pathlib.Path(__file__).resolve().parents[2]
DAY = "2026.11.30"
BAD_VERSIONS = ["v1", "llama3", "20260628", "2026-06-28", "", "2026.13.01"]


# --- a small experiment used by most tests -------------------------------------------------------

CALLS: list[str] = []
_CALLS_LOCK = threading.Lock()


@dataclass(frozen=True)
class Score(Artifact):
    value: int


def _run_fn(name: str, fail: bool = False):
    def run(config: dict) -> None:
        with _CALLS_LOCK:
            CALLS.append(name)
        if fail:
            raise RuntimeError(f"{name} exploded")
        storage.write_text_atomic(storage.join(config["output_path"], "out.txt"), name)

    return run


def _exp_model(
    artifact_type: type[Any], build_config: Any, deps: tuple[ArtifactStep[Any], ...] = ()
) -> ArtifactStep[Any]:
    """`exp/model` of `artifact_type` with its own `build_config` (the problem under test)."""
    return ArtifactStep(
        name="exp/model",
        version=resolve_version("exp/model", None),
        artifact_type=artifact_type,
        run=_run_fn("exp/model"),
        build_config=build_config,
        deps=deps,
    )


def _step(name: str, *deps: ArtifactStep[Any], version: str | None = None, fail: bool = False, **literals):
    return ArtifactStep(
        name=name,
        version=resolve_version(name, version),
        artifact_type=Directory,
        run=_run_fn(name, fail),
        build_config=lambda ctx: {
            "output_path": ctx.output_path,
            "inputs": [ctx.artifact_path(d) for d in deps],
            **literals,
        },
        deps=deps,
    )


@click.command()
@click.option("--shape", default="one", help="How main returns its handles.")
@click.option("--pinned", is_flag=True, help="Give exp/data an explicit version in code.")
@click.option("--lr", default=0.1, help="A literal of exp/model.")
@build_options
def experiment(shape: str, pinned: bool, lr: float):
    data = _step("exp/data", version="2026.01.01" if pinned else None, rows=10)
    model = _step("exp/model", data, lr=lr)
    report = _step("exp/report", model)
    if shape == "one":
        return report
    if shape == "list":
        return [model, report]
    if shape == "tuple":
        return (model, report)
    if shape == "dict":
        return {"model": model, "report": report}
    if shape == "int":
        return 42
    if shape == "none":
        return None
    if shape == "mixed":
        return [report, "exp/model"]
    if shape == "empty":
        return []
    raise AssertionError(shape)


@click.command()
@click.option("--problem", required=True)
@build_options
def broken(problem: str):
    if problem == "fixed-on-mutable":
        dev = _step("exp/dev-data", version="dev")
        return _step("exp/model", dev, version=DAY)
    if problem == "callable":
        return _step("exp/model", callback=print)
    if problem == "runtime-arg":
        return _exp_model(Directory, lambda ctx: {"gpus": ctx.runtime_arg("gpus")})
    if problem == "resolved-at-fingerprint":
        data = _step("exp/data")
        return _exp_model(Directory, lambda ctx: {"data": ctx.resolved(data).path}, deps=(data,))
    if problem == "failures":
        bad_a = _step("exp/bad-a", fail=True)
        bad_b = _step("exp/bad-b", fail=True)
        after = _step("exp/after", bad_a)
        fine = _step("exp/fine")
        return [after, bad_b, fine]
    if problem == "wrong-type":
        return _exp_model(Score, lambda ctx: {"output_path": ctx.output_path})
    if problem == "step-name-tab":
        return _step("exp/da\tta")
    if problem == "step-name-newline":
        return _step("exp/data\n")
    raise AssertionError(problem)


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    for name in ("RLAUNCH_PREFIX", "RLAUNCH_REGION", "RLAUNCH_LOCK_STALE_SECONDS", "RLAUNCH_LOCK_HEARTBEAT_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    CALLS.clear()


def invoke(command, *args: str):
    return CliRunner().invoke(command, list(args))


def plan_rows(output: str) -> list[list[str]]:
    """The step rows of a text plan: [identity, short fingerprint, action..., path]."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Plan ("))
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


def resolved_versions(output: str) -> list[str]:
    lines = output.splitlines()
    start = lines.index("Resolved versions:")
    return [line.split()[0] for line in lines[start + 1 :] if line.strip()]


# --- options ---------------------------------------------------------------------------------------


def test_help_lists_the_options_and_defaults():
    result = invoke(experiment, "--help")
    assert result.exit_code == 0
    for option in ("--version", "--override", "--run", "--max-concurrent", "--plan-format"):
        assert option in result.output
    assert re.search(r"--max-concurrent.*default:\s*8", result.output, re.S)
    assert "text|json" in result.output


def test_version_is_required():
    result = invoke(experiment)
    assert result.exit_code == 2
    assert "--version" in result.output
    assert CALLS == []


@pytest.mark.parametrize("version", BAD_VERSIONS)
def test_a_bad_version_is_rejected_at_parse_time_with_the_grammar(prefix, version):
    result = invoke(experiment, "--version", version, "--run")
    assert result.exit_code == 2
    assert "YYYY.MM.DD" in result.output and "-dev" in result.output
    assert CALLS == [] and not os.path.exists(prefix)


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        ("2026.11.30\t", "contains whitespace '\\t' (U+0009) at position 10"),
        ("2026.11.30\n", "contains whitespace '\\n' (U+000A) at position 10"),
        ("alice/x-dev", "contains a path separator '/' (U+002F) at position 5"),
    ],
    ids=["tab", "trailing-newline", "slash"],
)
def test_a_version_that_is_no_name_is_refused_naming_the_option(prefix, version, problem):
    result = invoke(experiment, "--version", version, "--run")
    assert result.exit_code == 2
    assert f"--version={version!r} {problem}; remove it" in result.output
    assert CALLS == [] and not os.path.exists(prefix)


@pytest.mark.parametrize(
    ("option", "value"),
    [("--max-concurrent", "0"), ("--plan-format", "yaml")],
    ids=["max-concurrent-must-be-positive", "plan-format-is-text-or-json"],
)
def test_an_option_outside_its_values_is_refused(option: str, value: str) -> None:
    assert invoke(experiment, "--version", DAY, option, value).exit_code == 2


# --- the plan ----------------------------------------------------------------------------------------


def test_the_plan_lists_every_step_in_dependency_order(prefix):
    result = invoke(experiment, "--version", DAY)
    assert result.exit_code == 0, result.output
    rows = plan_rows(result.output)
    assert [r[0] for r in rows] == ["exp/data@2026.11.30", "exp/model@2026.11.30", "exp/report@2026.11.30"]
    for row in rows:
        name = row[0].split("@")[0]
        assert re.fullmatch(r"[0-9a-f]{12}", row[1])
        assert row[2] == "run"
        assert row[-1] == f"{prefix}/{name}/2026.11.30"
    assert resolved_versions(result.output) == [r[0] for r in rows]
    assert CALLS == [] and not os.path.exists(prefix)


def test_the_plan_fingerprints_are_the_steps_fingerprints(prefix):
    text = invoke(experiment, "--version", DAY).output
    payload = json.loads(invoke(experiment, "--version", DAY, "--plan-format", "json").stdout)
    by_identity = {s["identity"]: s["fingerprint"] for s in payload["steps"]}
    for row in plan_rows(text):
        assert by_identity[row[0]].startswith(row[1])
    assert invoke(experiment, "--version", DAY, "--lr", "0.2").output != text


def test_the_json_plan(prefix):
    result = invoke(experiment, "--version", DAY, "--plan-format", "json")
    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    assert payload["prefix"] == prefix
    assert [s["identity"] for s in payload["steps"]] == [
        "exp/data@2026.11.30",
        "exp/model@2026.11.30",
        "exp/report@2026.11.30",
    ]
    model = payload["steps"][1]
    assert model["action"] == "run" and model["deps"] == ["exp/data@2026.11.30"]
    assert model["path"] == f"{prefix}/exp/model/2026.11.30" and len(model["fingerprint"]) == 64
    assert payload["resolved_versions"] == [s["identity"] for s in payload["steps"]]


def test_the_plan_shows_served_and_rebuilt_steps(prefix):
    assert invoke(experiment, "--version", DAY, "--run").exit_code == 0
    rows = plan_rows(invoke(experiment, "--version", DAY).output)
    assert [" ".join(r[2:-1]) for r in rows] == ["not needed", "not needed", "serve from storage"]
    rows = plan_rows(invoke(experiment, "--version", "alice-dev").output)
    assert [" ".join(r[2:-1]) for r in rows] == ["rebuild (mutable)"] * 3
    assert "(mutable" in invoke(experiment, "--version", "alice-dev").output.split("Resolved versions:")[1]


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ("one", ["exp/report"]),
        ("list", ["exp/model", "exp/report"]),
        ("tuple", ["exp/model", "exp/report"]),
        ("dict", ["exp/model", "exp/report"]),
    ],
)
def test_main_may_return_a_handle_a_sequence_or_a_mapping(prefix, shape, expected):
    result = invoke(experiment, "--version", DAY, "--shape", shape, "--run")
    assert result.exit_code == 0, result.output
    assert sorted(CALLS) == ["exp/data", "exp/model", "exp/report"]
    for name in expected:
        assert records.is_succeeded(f"{prefix}/{name}/{DAY}")


@pytest.mark.parametrize("shape", ["int", "none", "mixed", "empty"])
def test_main_returning_anything_else_is_a_clear_error(prefix, shape):
    result = invoke(experiment, "--version", DAY, "--shape", shape)
    assert result.exit_code != 0
    assert "Traceback" not in result.output and isinstance(result.exception, SystemExit)
    assert "ArtifactStep" in result.output or "no steps" in result.output


# --- overrides ----------------------------------------------------------------------------------------


def test_an_override_reaches_the_builder_of_that_name(prefix):
    result = invoke(experiment, "--version", DAY, "--override", "exp/data=2026.11.29")
    assert result.exit_code == 0, result.output
    assert resolved_versions(result.output) == [
        "exp/data@2026.11.29",
        "exp/model@2026.11.30",
        "exp/report@2026.11.30",
    ]


def test_several_overrides(prefix):
    result = invoke(
        experiment, "--version", DAY, "--override", "exp/data=2026.11.29", "--override", "exp/report=bob-dev"
    )
    assert result.exit_code == 0, result.output
    assert resolved_versions(result.output) == ["exp/data@2026.11.29", "exp/model@2026.11.30", "exp/report@bob-dev"]


def test_an_override_no_builder_consulted_is_an_error_naming_it(prefix):
    result = invoke(experiment, "--version", DAY, "--override", "exp/dta=2026.11.29", "--run")
    assert result.exit_code != 0
    assert "exp/dta" in result.output
    assert CALLS == []


def test_an_explicit_version_in_code_wins_and_its_override_is_reported(prefix):
    result = invoke(experiment, "--version", DAY, "--pinned")
    assert resolved_versions(result.output)[0] == "exp/data@2026.01.01"
    result = invoke(experiment, "--version", DAY, "--pinned", "--override", "exp/data=2026.11.29")
    assert result.exit_code != 0
    assert "exp/data" in result.output and "explicit version" in result.output


def test_a_duplicate_override_is_rejected(prefix):
    result = invoke(
        experiment, "--version", DAY, "--override", "exp/data=2026.11.29", "--override", "exp/data=2026.11.28"
    )
    assert result.exit_code == 2
    assert "exp/data" in result.output and "twice" in result.output


@pytest.mark.parametrize("raw", ["exp/data", "=2026.11.29", "exp/data=", "exp/data=v1", "exp/data:2026.11.29"])
def test_a_malformed_override_is_rejected(prefix, raw):
    result = invoke(experiment, "--version", DAY, "--override", raw, "--run")
    assert result.exit_code == 2
    assert "--override" in result.output
    assert CALLS == []


# --- recipe errors surface as messages, not tracebacks -----------------------------------------


@pytest.mark.parametrize(
    ("problem", "fragment"),
    [
        ("fixed-on-mutable", "exp/dev-data@dev"),
        ("callable", "callback"),
        ("runtime-arg", "gpus"),
        ("resolved-at-fingerprint", "ctx.resolved(exp/data@2026.11.30)"),
        ("step-name-tab", "name='exp/da\\tta' contains whitespace '\\t' (U+0009) at position 6; remove it"),
        ("step-name-newline", "name='exp/data\\n' contains whitespace '\\n' (U+000A) at position 8; remove it"),
    ],
)
def test_recipe_errors_are_reported_before_anything_runs(prefix, problem, fragment):
    for extra in ([], ["--run"]):
        result = invoke(broken, "--version", DAY, "--problem", problem, *extra)
        assert result.exit_code == 2, result.output  # an expected error (UserError): one line, exit 2
        assert fragment in result.output
        assert "Traceback" not in result.output
        assert isinstance(result.exception, SystemExit)  # a clean click error, not an escaped exception
    assert CALLS == []


# --- running ---------------------------------------------------------------------------------------------


def test_run_builds_and_prints_each_outcome(prefix):
    result = invoke(experiment, "--version", DAY, "--run")
    assert result.exit_code == 0, result.output
    assert CALLS == ["exp/data", "exp/model", "exp/report"]
    for name in ("exp/data", "exp/model", "exp/report"):
        assert re.search(rf"built {name}@{DAY} .*-> {re.escape(prefix)}/{name}/{DAY}", result.output)
    assert "at most 8 at a time" in result.output
    assert "All steps succeeded." in result.output

    again = invoke(experiment, "--version", DAY, "--run")
    assert again.exit_code == 0
    assert f"served from storage exp/report@{DAY}" in again.output
    assert CALLS == ["exp/data", "exp/model", "exp/report"]


def test_run_honours_max_concurrent(prefix):
    result = invoke(experiment, "--version", DAY, "--run", "--max-concurrent", "1")
    assert result.exit_code == 0 and "at most 1 at a time" in result.output


def test_a_mutable_run_rebuilds_every_time(prefix):
    invoke(experiment, "--version", "alice-dev", "--run")
    result = invoke(experiment, "--version", "alice-dev", "--run")
    assert result.exit_code == 0
    assert CALLS.count("exp/report") == 2
    assert "rebuilt (mutable) exp/report@alice-dev" in result.output


def test_a_failed_run_exits_non_zero_naming_every_failed_step(prefix):
    result = invoke(broken, "--version", DAY, "--problem", "failures", "--run")
    assert result.exit_code == 1
    for identity in ("exp/bad-a@2026.11.30", "exp/bad-b@2026.11.30", "exp/after@2026.11.30"):
        assert identity in result.stderr
    assert "exploded" in result.stderr
    assert "exp/fine" not in result.stderr
    assert records.is_succeeded(f"{prefix}/exp/fine/{DAY}")
    assert "exp/after" not in CALLS


def test_a_wrong_result_type_fails_the_run(prefix):
    result = invoke(broken, "--version", DAY, "--problem", "wrong-type", "--run")
    assert result.exit_code == 1
    assert "exp/model@2026.11.30" in result.stderr


# --- experiments/hello.py ------------------------------------------------------------------------------


@pytest.fixture
def hello(monkeypatch):
    """The repository's experiments/hello.py, even if another `experiments` package was imported."""
    monkeypatch.syspath_prepend(str(REPO))
    ours = str(REPO / "experiments")
    for name in [m for m in sys.modules if m == "experiments" or m.startswith("experiments.")]:
        if not str(getattr(sys.modules[name], "__file__", None) or "").startswith(ours):
            monkeypatch.delitem(sys.modules, name)
    return importlib.import_module("experiments.hello")


def _hello_process(*args: str, cwd: pathlib.Path, prefix: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLAUNCH_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if prefix:
        env["RLAUNCH_PREFIX"] = prefix
    return subprocess.run(
        [sys.executable, "-m", "experiments.hello", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


HELLO_STEPS = ["hello/text", "hello/counts", "hello/summary"]


def test_hello_in_process(hello, prefix):
    plan = invoke(hello.main, "--version", DAY)
    assert plan.exit_code == 0, plan.output
    assert [r[0] for r in plan_rows(plan.output)] == [f"{n}@{DAY}" for n in HELLO_STEPS]
    built = invoke(hello.main, "--version", DAY, "--run")
    assert built.exit_code == 0, built.output
    assert all(f"built {n}@{DAY}" in built.output for n in HELLO_STEPS)
    record = records.read_record(f"{prefix}/hello/summary/{DAY}")
    assert record["result"]["line"].startswith("30 words")
    again = invoke(hello.main, "--version", DAY, "--run")
    assert again.exit_code == 0
    assert "building" not in again.output and f"served from storage hello/summary@{DAY}" in again.output


def test_hello_as_a_real_process(tmp_path, hello):
    work = tmp_path / "proc"
    work.mkdir()
    plan = _hello_process("--version", DAY, cwd=work)
    assert plan.returncode == 0, plan.stderr
    default_prefix = work / "rlaunch-artifacts"
    rows = plan_rows(plan.stdout)
    assert [r[0] for r in rows] == [f"{n}@{DAY}" for n in HELLO_STEPS]
    assert [r[2] for r in rows] == ["run"] * 3
    assert rows[0][-1] == f"{default_prefix}/hello/text/{DAY}"
    assert "Resolved versions:" in plan.stdout
    assert not default_prefix.exists()

    first = _hello_process("--version", DAY, "--run", cwd=work)
    assert first.returncode == 0, first.stderr
    assert all(f"built {n}@{DAY}" in first.stdout for n in HELLO_STEPS)
    assert (default_prefix / "hello" / "summary" / DAY / "summary.txt").exists()

    second = _hello_process("--version", DAY, "--run", cwd=work)
    assert second.returncode == 0, second.stderr
    assert "building" not in second.stdout and "built " not in second.stdout
    assert f"served from storage hello/summary@{DAY}" in second.stdout
    assert "warning" not in second.stdout

    # The same module imported in this process agrees with `python -m` on every fingerprint,
    # and on the stored result type.
    in_process = json.loads(invoke(hello.main, "--version", DAY, "--plan-format", "json").stdout)
    in_subprocess = json.loads(_hello_process("--version", DAY, "--plan-format", "json", cwd=work).stdout)
    assert [s["fingerprint"] for s in in_process["steps"]] == [s["fingerprint"] for s in in_subprocess["steps"]]
    record = records.read_record(str(default_prefix / "hello" / "summary" / DAY))
    assert record["result_type"] == "experiments.hello.Summary" == hello.Summary.type_name()


def test_hello_run_against_a_prefix_and_a_failing_override(tmp_path, hello):
    work = tmp_path / "proc"
    work.mkdir()
    prefix = str(tmp_path / "elsewhere") + "/"
    run = _hello_process(
        "--version", "alice-dev", "--override", "hello/text=2026.11.29", "--run", cwd=work, prefix=prefix
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "elsewhere" / "hello" / "text" / "2026.11.29" / "text.txt").exists()
    assert "//" not in run.stdout.replace("://", "")
    typo = _hello_process("--version", DAY, "--override", "hello/txt=2026.11.29", cwd=work)
    assert typo.returncode != 0 and "hello/txt" in typo.stderr


@click.command()
@click.option("--stage", type=click.Choice(["data", "report"]), default="report", help="Terminal stage.")
@build_options
def staged(stage: str):
    data = _step("exp/data", rows=10)
    return data if stage == "data" else _step("exp/report", data)


def test_a_terminal_stage_left_to_its_default_is_noted_in_the_plan(prefix):
    note = "note: --stage report [default]: the terminal stage came from its default, not the command line"
    defaulted = invoke(staged, "--version", DAY)
    assert defaulted.exit_code == 0, defaulted.output
    assert f"{note}; choose it with --stage data|report" in defaulted.stdout.splitlines()
    payload = json.loads(invoke(staged, "--version", DAY, "--plan-format", "json").stdout)
    assert [n.startswith(note) for n in payload["notes"]] == [True]
    chosen = invoke(staged, "--version", DAY, "--stage", "report")  # the same value, chosen: no note
    assert chosen.exit_code == 0 and "[default]" not in chosen.stdout
    assert (
        json.loads(invoke(staged, "--version", DAY, "--stage", "report", "--plan-format", "json").stdout)["notes"] == []
    )
    assert "note: --stage" not in invoke(experiment, "--version", DAY).stdout  # no stage option, no note
