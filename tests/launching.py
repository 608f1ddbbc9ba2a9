"""Running real experiments as subprocesses (coordinator, host, child job, task) in a tmp prefix."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKER_PLUGIN = "tests.plugins.marker_runtime"
# A multi-node launch is a large launch: the smoke gate needs a smoke or a reason. The launcher's own
# multi-node tests rehearse the launch path on a test runtime that trains nothing, and say so.
MULTINODE_SKIP = ("--skip-smoke-gate", "a launcher test of a multi-node gang on a test runtime")


class Launcher:
    """Runs `python -m <module> ...` from the repository root with an isolated prefix."""

    def __init__(self, prefix: Path, extra_env: dict[str, str]):
        self.prefix = prefix
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("RLAUNCH_")},
            "RLAUNCH_PREFIX": str(prefix),
            "RLAUNCH_RUNTIME_PLUGINS": MARKER_PLUGIN,
            "RLAUNCH_STAGING_ROOT": str(prefix / "_staging"),
            "RLAUNCH_ERROR_DIR": str(prefix.parent / "errors"),  # saved tracebacks stay in the test's root
            "PYTHONPATH": str(REPO),
            **extra_env,
        }
        if os.environ.get("RLAUNCH_RUNTIME_CACHE"):
            self.env["RLAUNCH_RUNTIME_CACHE"] = os.environ["RLAUNCH_RUNTIME_CACHE"]

    def run(
        self, *args: str, timeout: float = 180, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args],
            cwd=REPO,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def backend(self):  # noqa: ANN201 - the local backend over this prefix's job root
        from rlaunch.cluster.local.backend import LocalBackend

        return LocalBackend(root=str(self.prefix / ".jobs"))
