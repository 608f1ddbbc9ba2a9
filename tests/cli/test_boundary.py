"""The error boundary: every entry point ends in one line and an exit code, never a bare traceback.

Expected errors (`UserError`) exit 2 naming the value and the fix; anything else exits 1 with the
path of its saved traceback. Class 11 of the hardening issue (CLI inputs that used to crash) is
pinned here, each case through the real `rlaunch` command.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from rlaunch.boundary import ERROR_DIR_ENV, error_boundary
from rlaunch.cli import build_options
from rlaunch.cli.admin import main as rlaunch_main
from rlaunch.errors import UserError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    return {
        "RLAUNCH_PREFIX": str(prefix),
        "RLAUNCH_LOCAL_ROOT": str(prefix / ".jobs"),
        ERROR_DIR_ENV: str(tmp_path / "errors"),
    }


def rlaunch(env: dict[str, str], *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(rlaunch_main, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["logs", "x@2026.11.30", "--tail", "99999999999999999999"], "is not in the range"),
        (["jobs", "logs", "somejob", "--tail", "99999999999999999999"], "is not in the range"),
        (["jobs", "status", "j" * 300], "no local job"),
        (["status", "j" * 300], "is not an RL artifact"),
        (["runs", "--prefix", "/"], "is a filesystem root"),
        (["runs", "--prefix", "/proc"], "a system directory (/proc) is not a storage prefix"),
        (["runs", "--prefix", "/usr/"], "a system directory (/usr) is not a storage prefix"),
        (["status", "x@2026.11.30", "--prefix", "/"], "is a filesystem root"),
        (["status", "nosuch-job-abc", "--prefix", "/tmp/a\x00b"], "holds a NUL byte"),
        (["runs", "--prefix", "s3://bucket/a\x00"], "holds a NUL byte"),
        (["runs", "--prefix", "nosuch://x"], "no fsspec filesystem can open it"),
        (["status", "x@2026.11.30", "--prefix", "nosuch://x"], "no fsspec filesystem can open it"),
        (["plot", "x@2026.11.30", "-o", "/nonexistent/x.png"], "/nonexistent does not exist"),
        (["status", "nosuch-job-abc"], "is not an RL artifact"),
    ],
)
def test_bad_cli_inputs_are_one_line_errors_exit_2(env: dict[str, str], args: list[str], fragment: str) -> None:
    code, output = rlaunch(env, *args)
    assert code == 2, output
    assert fragment in output
    assert "Traceback" not in output


def test_a_system_prefix_is_refused_before_anything_is_read(env: dict[str, str], monkeypatch) -> None:
    """`runs --prefix /` used to walk the whole machine, /proc included."""
    from rlaunch.observe import run_list as runs

    walked: list[str] = []
    monkeypatch.setattr(runs, "run_records", lambda prefix, damaged=None: walked.append(prefix) or [])
    code, _ = rlaunch(env, "runs", "--prefix", "/")
    assert code == 2 and walked == []


def test_an_unexpected_error_names_its_saved_traceback(env: dict[str, str], monkeypatch) -> None:
    from rlaunch.observe import run_list

    secret = "hf_" + "Qx" * 17

    def broken(
        prefix: str, name_prefix: str | None = None, damaged: list | None = None, sweep: str | None = None
    ) -> list:
        raise RuntimeError(f"disk on fire while reading {secret}")

    monkeypatch.setattr(run_list, "list_runs", broken)
    code, output = rlaunch(env, "runs")
    assert code == 1
    assert "Traceback" not in output
    assert "rlaunch failed unexpectedly: RuntimeError: disk on fire" in output and "this is a bug" in output
    saved = list(Path(env[ERROR_DIR_ENV]).glob("*.txt"))
    assert len(saved) == 1 and str(saved[0]) in output
    text = saved[0].read_text()
    assert "Traceback (most recent call last)" in text and "in broken" in text
    assert secret not in text and secret not in output


def test_user_errors_pass_their_exit_code_and_click_errors_pass_through() -> None:
    class Refused(UserError):
        exit_code = 2

    @click.command()
    @click.option("--mode", type=click.Choice(["user", "click", "exit"]))
    def command(mode: str) -> None:
        with error_boundary("probe"):
            if mode == "user":
                raise Refused("field x=3: must be even; set x=4")
            if mode == "click":
                raise click.BadParameter("nope", param_hint="--mode")
            raise SystemExit(7)

    runner = CliRunner()
    user = runner.invoke(command, ["--mode", "user"])
    assert user.exit_code == 2 and user.output.strip() == "error: field x=3: must be even; set x=4"
    clicked = runner.invoke(command, ["--mode", "click"])
    assert clicked.exit_code == 2 and "Invalid value for --mode: nope" in clicked.output
    assert runner.invoke(command, ["--mode", "exit"]).exit_code == 7


@click.command()
@build_options
def exploding_main() -> None:
    raise ZeroDivisionError("a bug in the experiment")


def test_an_experiment_main_that_crashes_saves_its_traceback(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        exploding_main,
        ["--version", "2026.11.30"],
        env={"RLAUNCH_PREFIX": str(tmp_path / "prefix"), ERROR_DIR_ENV: str(tmp_path / "errors")},
        catch_exceptions=False,
    )
    assert result.exit_code == 1
    assert "failed unexpectedly: ZeroDivisionError: a bug in the experiment" in result.output
    (saved,) = (tmp_path / "errors").glob("*.txt")
    assert "exploding_main" in saved.read_text()


def test_the_task_bootstrap_and_the_host_end_in_one_line(tmp_path: Path) -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RLAUNCH_")},
        "PYTHONPATH": str(REPO),
        "RLAUNCH_PREFIX": str(tmp_path / "prefix"),
        ERROR_DIR_ENV: str(tmp_path / "errors"),
    }
    missing = str(tmp_path / "missing.yaml")
    for argv in (["-m", "rlaunch.task", "--config", missing], ["-m", "rlaunch", "launch", "--config", missing]):
        done = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, done.stderr  # an expected error: the file is named
        assert "Traceback" not in done.stderr and "missing.yaml" in done.stderr, done.stderr
    import json

    assert json.loads(done.stdout.strip().splitlines()[-1])["state"] == "failed"  # the host's JSON result
