"""A fresh process that imports `rlaunch.skyrl` and refuses the broken 64-GPU plan stays light.

The researcher pays this on every dry run, so the preflight must not load storage (fsspec), the
artifact graph and its runner, asyncio, a YAML parser or `packaging`'s requirement parser and
platform tags (profiles, base configs and locks are read from their JSON twins,
`rlaunch.runtimes.parsed`) or pathlib (with urllib.parse and ipaddress; profile
paths are strings). The snippet is the one `benchmarks/preflight.py`
times, so the benchmark and this test measure the same thing; the test asserts what is loaded,
not how long it takes, so it cannot flake on a busy machine.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from types import ModuleType

from tests.support import file_modules

REPO = pathlib.Path(__file__).resolve().parents[1]
FORBIDDEN = (
    "fsspec",
    "asyncio",
    "yaml",
    "packaging.requirements",
    "packaging.tags",
    "pathlib",
    "concurrent.futures",
    "rlaunch.artifacts",
    "rlaunch.storage",
    "rlaunch.rules.memory",  # memory fit needs a model config.json: a plan without one never sizes
    "rlaunch.rules.model_shape",
    "rlaunch.rules.fit",
)


def _benchmark() -> ModuleType:
    return file_modules.load("benchmarks/preflight.py", "preflight_benchmark")


def loaded_after(code: str, tmp_path: pathlib.Path) -> tuple[list[str], str]:
    """(forbidden modules loaded, stdout) of a fresh interpreter running `code`."""
    report = (
        "\nimport json, sys\n"
        f"forbidden = {FORBIDDEN!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if any(m == f or m.startswith(f + '.') for f in forbidden))))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLAUNCH_")}
    env["PYTHONPATH"] = str(REPO / "src")
    env["RLAUNCH_PREFIX"] = str(tmp_path / "prefix")
    done = subprocess.run(
        [sys.executable, "-c", code + report], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    *output, modules = done.stdout.strip().splitlines()
    return json.loads(modules), "\n".join(output)


def test_the_check_catches_a_forbidden_import(tmp_path):
    """The harness itself works: a snippet that does load the runner and fsspec is reported."""
    loaded, _ = loaded_after("import rlaunch.artifacts.runner, fsspec", tmp_path)
    assert "rlaunch.artifacts.runner" in loaded and "fsspec" in loaded


def test_a_cold_broken_plan_verdict_loads_no_storage_runner_asyncio_or_yaml(tmp_path):
    bench = _benchmark()
    loaded, output = loaded_after(bench.COLD_SNIPPET, tmp_path)
    assert bench.EXPECTED_COLD <= set(output.split(",")), output  # the verdict is the real one
    assert loaded == [], f"the cold preflight imported {loaded}; keep these imports lazy (see ARCHITECTURE.md)"
