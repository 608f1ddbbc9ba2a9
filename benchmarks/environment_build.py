"""Time cold and warm builds of the trl-cpu runtime and the Python 3.12 test tiers' environments.

    .venv/bin/python benchmarks/environment_build.py [trl-cpu] [iris] [skyrl] [--scratch /tmp/envbench]

Each build goes into a fresh `RLAUNCH_RUNTIME_CACHE` under `--scratch` (never ~/.cache): cold
with an empty package cache (uv's and pip's, both pointed at one scratch directory), then warm:
a fresh venv again, with the package cache the cold build filled. It builds through
`rlaunch.runtimes.environment.build_venv`, so running it against another checkout
(`PYTHONPATH=<checkout>/src`) times that checkout's builder on the same locks.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rlaunch.runtimes.environment import build_venv  # noqa: E402
from tests.support.py312_tier import find_python312  # noqa: E402

TARGETS = {  # name -> (lock, Python)
    "trl-cpu": (REPO / "src" / "rlaunch" / "runtimes" / "trl_cpu" / "lock.txt", "3.11"),
    "iris": (REPO / "tests" / "iris" / "lock.txt", "3.12"),
    "skyrl": (REPO / "tests" / "contract" / "skyrl" / "lock.txt", "3.12"),
}


def timed_build(name: str, scratch: Path, run: str) -> float:
    lock, python = TARGETS[name]
    interpreter = find_python312().path if python == "3.12" else None
    root = scratch / f"{name}-{run}"
    shutil.rmtree(root, ignore_errors=True)
    started = time.monotonic()
    build_venv(f"{name} ({run})", lock, python, interpreter=interpreter, root=root, progress=lambda m: None)
    seconds = time.monotonic() - started
    shutil.rmtree(root, ignore_errors=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"any of {sorted(TARGETS)} (default: all)")
    parser.add_argument("--scratch", default="/tmp/rlaunch-envbench")
    args = parser.parse_args()
    unknown = sorted(set(args.names) - set(TARGETS))
    if unknown:
        parser.error(f"unknown target(s) {unknown}; choose from {sorted(TARGETS)}")
    scratch = Path(args.scratch)
    packages = scratch / "package-cache"
    for name in args.names or list(TARGETS):
        shutil.rmtree(packages, ignore_errors=True)
        os.environ["UV_CACHE_DIR"] = os.environ["PIP_CACHE_DIR"] = str(packages)
        cold = timed_build(name, scratch, "cold")
        warm = timed_build(name, scratch, "warm")
        print(f"{name:8s} cold {cold:6.1f} s   warm {warm:6.1f} s", flush=True)
    shutil.rmtree(packages, ignore_errors=True)


if __name__ == "__main__":
    main()
