"""The Python 3.12 test tier: sub-suites that must run against packages which need Python 3.12.

Some contracts can only be checked against the real package (SkyRL 0.4.0, marin-iris), and those
need Python 3.12 while rlaunch itself runs on 3.11+. A tier is a directory of tests that runs in
its own Python 3.12 virtualenv, built from a fully pinned lock by rlaunch's own environment
builder (`rlaunch.runtimes.environment.build_venv`, cached under
`$RLAUNCH_RUNTIME_CACHE/venvs/<sha256(lock)[:16]>`, so it is built once per lock), and is driven
by one test of the README's test command.

API (one module-level `Tier` and one driver test per tier)::

    from tests.support.py312_tier import Tier, run_tier

    SKYRL = Tier(
        name="skyrl",                                   # also the pytest marker of its tests
        lock=REPO / "tests/contract/skyrl/lock.txt",    # fully pinned; must pin pytest and what
                                                        # rlaunch needs (click, pyyaml, fsspec, rich)
        tests=("tests/contract/skyrl",),                # run inside the tier, from the repo root
    )

    @pytest.mark.skyrl
    def test_skyrl_tier() -> None:
        run_tier(SKYRL)    # pytest.skip(<one line why>) without Python 3.12; a failure carries
                           # the sub-suite's summary and output tail

and in the tier directory's `conftest.py`, so its tests are collected only inside the tier::

    from tests.support.py312_tier import collect_only_inside
    collect_ignore_glob = collect_only_inside("skyrl")

* `find_python312()` -> `Interpreter`: `$RLAUNCH_PYTHON312` when set (it must run as 3.12; a
  wrong value is an error, not a skip), else `python3.12` on PATH, else
  `$(pyenv root)/versions/3.12*/bin/python3.12`; each candidate is probed (a pyenv shim that
  is not activated does not count). `Interpreter.path` is None when none is found and
  `Interpreter.reason` says why.
* `tier_environment(tier)` -> the tier venv's python (built on first use).
* `tier_command(tier, python, *extra_pytest_args)` / `tier_env(tier)`: the argv and environment
  `run_tier` uses: `python -m pytest -m <name> <tests>` in the repository root with PYTHONPATH =
  the repository root and `src/` (rlaunch from this checkout, not installed into the venv) and
  `RLAUNCH_PY312_TIER=<name>`.
* `run_tier(tier)` -> `TierResult` (exit code, summary line, seconds, output); it skips when
  Python 3.12 is absent and fails the calling test when the sub-suite fails or collects nothing.
* `inside_tier(name)`: whether this process is that tier's sub-suite.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from rlaunch.runtimes.environment import build_venv

REPO = Path(__file__).resolve().parents[2]
PYTHON_ENV = "RLAUNCH_PYTHON312"
TIER_ENV = "RLAUNCH_PY312_TIER"
VERSION = "3.12"


@dataclass(frozen=True)
class Tier:
    name: str  # the tier's name and the pytest marker of its tests
    lock: Path  # fully pinned requirements of the tier's venv (pytest included)
    tests: tuple[str, ...]  # paths relative to the repository root
    timeout_s: float = 1200.0  # the sub-suite's wall-clock limit (the venv build is not counted)


@dataclass(frozen=True)
class Interpreter:
    path: str | None
    reason: str  # how it was found, or why none was


@dataclass(frozen=True)
class TierResult:
    returncode: int
    summary: str  # pytest's last line ("12 passed in 40.1s")
    seconds: float
    output: str


def _probe(candidate: str) -> str | None:
    """None when `candidate` runs as Python 3.12 with venv; otherwise what went wrong."""
    try:
        probe = subprocess.run(
            [candidate, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{candidate} does not run: {exc}"
    if probe.returncode != 0 or probe.stdout.strip() != VERSION:
        return f"{candidate} is not Python {VERSION}: {(probe.stderr or probe.stdout).strip()[:200]}"
    return None


def _pyenv_candidates() -> list[str]:
    roots = [os.environ.get("PYENV_ROOT", "")]
    pyenv = shutil.which("pyenv")
    if pyenv:
        out = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=False).stdout.strip()
        roots.append(out)
    roots.append(str(Path.home() / ".pyenv"))
    found: list[str] = []
    for root in dict.fromkeys(r for r in roots if r):
        found += sorted(
            glob.glob(os.path.join(root, "versions", f"{VERSION}*", "bin", f"python{VERSION}")), reverse=True
        )
    return found


def find_python312() -> Interpreter:
    """A Python 3.12 interpreter: $RLAUNCH_PYTHON312, `python3.12` on PATH, or pyenv's 3.12.*."""
    explicit = os.environ.get(PYTHON_ENV)
    if explicit:
        problem = _probe(explicit)
        if problem:
            raise RuntimeError(
                f"${PYTHON_ENV}={explicit!r} is unusable: {problem}; unset it or point it at Python 3.12"
            )
        return Interpreter(explicit, f"${PYTHON_ENV}")
    tried: list[str] = []
    on_path = shutil.which(f"python{VERSION}")
    for candidate, how in [(on_path, "PATH"), *((c, "pyenv") for c in _pyenv_candidates())]:
        if not candidate:
            continue
        problem = _probe(candidate)
        if problem is None:
            return Interpreter(candidate, how)
        tried.append(problem)
    detail = "; ".join(tried) if tried else f"no python{VERSION} on PATH and no pyenv {VERSION}.* install"
    return Interpreter(None, f"{detail} (install Python {VERSION} or set ${PYTHON_ENV})")


def inside_tier(name: str) -> bool:
    return os.environ.get(TIER_ENV) == name


def collect_only_inside(name: str) -> list[str]:
    """`collect_ignore_glob` for a tier directory's conftest: everything, unless inside the tier."""
    return [] if inside_tier(name) else ["*"]


def tier_environment(tier: Tier, interpreter: str) -> str:
    """The tier venv's python, built from `tier.lock` with `interpreter` on first use."""

    def say(message: str) -> None:
        print(f"[tier {tier.name}] {message}", file=sys.stderr, flush=True)

    venv, _ = build_venv(f"test tier {tier.name}", tier.lock, VERSION, interpreter=interpreter, progress=say)
    return str(venv / "bin" / "python")


def tier_env(tier: Tier) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "src")])
    env["PYTHONNOUSERSITE"] = "1"
    env[TIER_ENV] = tier.name
    return env


def tier_command(tier: Tier, python: str, *extra: str) -> list[str]:
    return [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", tier.name, *extra, *tier.tests]


def run_tier(tier: Tier, *extra: str) -> TierResult:
    """Run the tier's sub-suite in its Python 3.12 venv; skip (one line) without Python 3.12."""
    found = find_python312()
    if found.path is None:
        pytest.skip(f"Python 3.12 tier {tier.name!r} skipped: {found.reason}")
    python = tier_environment(tier, found.path)
    started = time.monotonic()
    try:
        proc = subprocess.run(
            tier_command(tier, python, *extra),
            cwd=REPO,
            env=tier_env(tier),
            capture_output=True,
            text=True,
            timeout=tier.timeout_s,
            check=False,
        )
        code, output = proc.returncode, proc.stdout + proc.stderr
    except subprocess.TimeoutExpired as exc:
        code = -1
        output = f"{exc.stdout or ''}{exc.stderr or ''}\n[tier {tier.name}] timed out after {tier.timeout_s:.0f}s"
    seconds = time.monotonic() - started
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    result = TierResult(code, lines[-1] if lines else "", seconds, output)
    print(f"[tier {tier.name}] Python 3.12 via {found.reason}: {result.summary} ({seconds:.0f}s)", flush=True)
    if code != 0:
        pytest.fail(
            f"Python 3.12 tier {tier.name!r} failed (exit {code}): {result.summary}\n{output[-12000:]}", pytrace=False
        )
    return result
