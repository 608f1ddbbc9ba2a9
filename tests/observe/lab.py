"""A lab for observe tests: real launches (coordinator, host, child gang, task bootstrap, trainer)
of `tests.experiments.marker` on the `test-marker` runtime, or of `experiments.smoke` on trl-cpu,
all under one temporary prefix, observed through the real `rlaunch` commands.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypeVar

from click.testing import CliRunner, Result

from rlaunch.cli.admin import main as rlaunch_main
from rlaunch.cluster.gang.procs import group_alive, process_alive
from rlaunch.cluster.local.backend import LocalBackend
from rlaunch.runs.layout import JOINED
from tests.support.launchers import MULTINODE_SKIP
from tests.support.runtime_registry import isolated_runtime_registry

REPO = Path(__file__).resolve().parents[2]
FAKE_SECRET = "hf_observe_lab_secret_0123456789"
T = TypeVar("T")


class Lab:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.prefix = root / "prefix"
        self.jobs_root = self.prefix / ".jobs"
        self.staging = root / "staging"
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("RLAUNCH_") and k not in ("RAY_ADDRESS", "WANDB_API_KEY", "HF_TOKEN")
        }
        self.env.update(
            RLAUNCH_PREFIX=str(self.prefix),
            RLAUNCH_LOCAL_ROOT=str(self.jobs_root),
            RLAUNCH_STAGING_ROOT=str(self.staging),
            RLAUNCH_ERROR_DIR=str(root / "errors"),  # saved tracebacks stay in the test's root
            RLAUNCH_RUNTIME_PLUGINS="tests.plugins.marker_runtime",
            RLAUNCH_LOCAL_KILL_GRACE="1",
            HF_TOKEN=FAKE_SECRET,  # forwarded to the jobs; must never reach a record
        )
        for name in ("RLAUNCH_RUNTIME_CACHE",):  # keep a shared runtime cache (trl-cpu builds once)
            if os.environ.get(name):
                self.env[name] = os.environ[name]

    # -- launching -----------------------------------------------------------------------------

    def start(self, module: str, version: str, *args: str) -> subprocess.Popen[str]:
        with open(self.root / f"{module.replace('.', '_')}-{version}.log", "w") as log:
            return subprocess.Popen(
                [sys.executable, "-m", module, "--version", version, *args, "--run"],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )

    def marker(
        self,
        version: str,
        scenario: str = "ok",
        *,
        steps: int = 4,
        replicas: int = 1,
        detach: bool = False,
        retry: str | None = None,
    ) -> subprocess.Popen[str]:
        args = ["--scenario", scenario, "--steps", str(steps), "--replicas", str(replicas)]
        args += list(MULTINODE_SKIP) if replicas > 1 else []
        args += ["--retry", retry] if retry else []
        return self.start("tests.experiments.marker", version, *args, *(["--detach"] if detach else []))

    def launch_log(self, module: str, version: str) -> str:
        return (self.root / f"{module.replace('.', '_')}-{version}.log").read_text()

    # -- observing -----------------------------------------------------------------------------

    def output_path(self, name: str, version: str) -> Path:
        return self.prefix / name / version

    def run_record(self, name: str, version: str) -> dict[str, Any] | None:
        path = self.output_path(name, version) / "run_record.json"
        return json.loads(path.read_text()) if path.exists() else None

    def attempt_dir(self, name: str, version: str, attempt_id: str) -> Path:
        return self.prefix / ".tmp" / "ttl=14d" / name / version / "attempts" / attempt_id

    def rlaunch(self, *args: str, input: str | None = None) -> Result:
        """`rlaunch ARGS` in this process, with the lab's environment (the runtime registry the
        marker plugin joins is put back afterwards, so no other test sees `test-marker`)."""
        with isolated_runtime_registry():
            return CliRunner().invoke(rlaunch_main, list(args), env=self.env, input=input, catch_exceptions=False)

    def rlaunch_process(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """`rlaunch ARGS` as its own process (what a user's shell does)."""
        return subprocess.run(
            [sys.executable, "-m", "rlaunch", *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def status(self, run: str) -> dict[str, Any]:
        result = self.rlaunch("status", run, "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    def joined(self, name: str, version: str, attempt_id: str) -> list[str]:
        directory = self.attempt_dir(name, version, attempt_id) / JOINED
        return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []

    # -- cleaning up ---------------------------------------------------------------------------

    def _live(self) -> tuple[list[int], list[int]]:
        supervisors, groups = [], []
        for job in self.jobs_root.iterdir() if self.jobs_root.is_dir() else []:
            sup = job / "supervisor.json"
            if sup.exists():
                info = json.loads(sup.read_text())
                if process_alive(info["pid"], info.get("identity")):
                    supervisors.append(info["pid"])
            state = job / "state.json"
            if state.exists():
                groups += [
                    r["pid"]
                    for r in json.loads(state.read_text())["replicas"]
                    if r.get("pid") and group_alive(r["pid"])
                ]
        return supervisors, groups

    def stop_everything(self) -> list[str]:
        """Cancel every job still running under the lab; returns what had to be stopped."""
        backend = LocalBackend(self.jobs_root, kill_grace=1.0)
        stopped = []
        for status in backend.list_jobs():
            if not status.state.terminal:
                stopped.append(status.job_id)
                backend.cancel(status.job_id, reason="test teardown")
        deadline = time.monotonic() + 15
        while any(self._live()) and time.monotonic() < deadline:
            time.sleep(0.1)
        supervisors, groups = self._live()
        for pid in supervisors:
            os.kill(pid, signal.SIGKILL)
        for pgid in groups:
            os.killpg(pgid, signal.SIGKILL)
        return stopped + [f"pid {p}" for p in supervisors] + [f"group {g}" for g in groups]
