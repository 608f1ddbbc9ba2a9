"""The dry run of the 64-GPU example prints exactly the plan and the violations it printed before.

The golden files were captured from the example's dry run before the spec stopped doing I/O, so a
refactoring of how the plan is computed cannot change what a researcher reads. What legitimately
varies is normalised: the prefix, source digests (64 hex) and step fingerprints (they cover the
runtime's source digest, which changes with any adapter edit).
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = pathlib.Path(__file__).with_name("golden")


def normalise(text: str, prefix: str) -> str:
    text = text.replace(prefix, "{prefix}").replace(sys.executable, "{python}")
    text = text.replace(f"Python {sys.version.split()[0]}", "Python {version}")  # the iris backend's refusal
    text = re.sub(r"\b[0-9a-f]{64}\b", "{digest}", text)
    return re.sub(r"(?m)^(  \S+@\S+\s+)[0-9a-f]{12}(  )", lambda m: m.group(1) + "{fp}".ljust(12) + m.group(2), text)


def dry_run(prefix: pathlib.Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RLAUNCH_", "WANDB_", "HF_"))}
    env["RLAUNCH_PREFIX"] = str(prefix)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "src")])
    command = [sys.executable, "-m", "experiments.rl_plan_example", "--version", "2026.11.30", *args]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("args", "golden", "exit_code"),
    [(("--stage", "rl"), "rl_plan_64gpu.txt", 0), (("--stage", "rl", "--broken"), "rl_plan_broken.txt", 2)],
    ids=["plan", "broken"],
)
def test_the_dry_run_prints_the_golden_plan(tmp_path: pathlib.Path, args: tuple[str, ...], golden: str, exit_code: int):
    prefix = tmp_path / "prefix"
    result = dry_run(prefix, *args)
    assert result.returncode == exit_code, result.stderr
    assert normalise(result.stdout + result.stderr, str(prefix)) == (GOLDEN / golden).read_text()
    assert not prefix.exists(), "a dry run writes nothing"
