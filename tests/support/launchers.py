"""Running real experiments as subprocesses (coordinator, host, child job, task) in a tmp prefix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
MARKER_PLUGIN = "tests.plugins.marker_runtime"
# A multi-node launch is a large launch: the smoke gate needs a smoke or a reason. The launcher's own
# multi-node tests rehearse the launch path on a test runtime that trains nothing, and say so.
MULTINODE_SKIP = ("--skip-smoke-gate", "a launcher test of a multi-node gang on a test runtime")
SMOKE_VERSION = "2026.11.30"


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


def checkout_launcher(prefix: Path, extra_env: dict[str, str]) -> Launcher:
    """A Launcher for a cluster tier: its jobs run rlaunch from the checkout, so each needs src/ on its path too."""
    return Launcher(prefix, {**extra_env, "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "src")])})


def cpu_smoke_through(launcher: Launcher, backend: str) -> tuple[str, str]:
    """Run the CPU smoke on `backend` and check what every backend's run shows: a succeeded attempt
    and terminal manifest, the evaluation report, `verify-smoke` PASS and `status` naming both jobs.
    Returns the coordinator's and the child's job ids."""
    done = launcher.run(
        "-m", "experiments.smoke", "--version", SMOKE_VERSION, "--backend", backend, "--run", timeout=1800
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert f"via {backend}" in done.stdout
    rl = launcher.prefix / "smoke" / "rl" / SMOKE_VERSION
    (attempt,) = json.loads((rl / "run_record.json").read_text())["attempts"]
    assert attempt["backend"] == backend and attempt["state"] == "succeeded"
    assert json.loads((rl / "terminal.json").read_text())["result"]["state"] == "succeeded"
    assert json.loads((launcher.prefix / "smoke" / "eval" / SMOKE_VERSION / "report.json").read_text())["n"] == 16
    run = f"smoke/rl@{SMOKE_VERSION}"
    verdict = launcher.run("-m", "rlaunch", "verify-smoke", run, timeout=300)
    assert verdict.returncode == 0 and ": PASS" in verdict.stdout, verdict.stdout + verdict.stderr
    coordinator, child = attempt["coordinator_job_id"], attempt["child_job_id"]
    status = launcher.run("-m", "rlaunch", "status", run, timeout=300)
    assert status.returncode == 0 and coordinator in status.stdout and child in status.stdout, status.stdout
    # The evaluation is a step job: a child of the same coordinator, on the same backend, in its run record.
    (evaluation,) = json.loads((launcher.prefix / "smoke" / "eval" / SMOKE_VERSION / "run_record.json").read_text())[
        "attempts"
    ]
    assert evaluation["kind"] == "step" and evaluation["backend"] == backend and evaluation["state"] == "succeeded"
    assert evaluation["coordinator_job_id"] == coordinator
    shown = launcher.run("-m", "rlaunch", "status", f"smoke/eval@{SMOKE_VERSION}", timeout=300)
    assert shown.returncode == 0 and evaluation["child_job_id"] in shown.stdout, shown.stdout
    return coordinator, child


def copied_marker_launcher(root: Path) -> Launcher:
    """A Launcher into `root/prefix` whose marker runtime is a copy under `root/plugins`, so that
    `release_copied_marker(root)` can change the runtime's files (and so its runtime digest)."""
    plugins = root / "plugins"
    shutil.copytree(
        REPO / MARKER_PLUGIN.replace(".", "/"), plugins / "copied_marker", ignore=shutil.ignore_patterns("__pycache__")
    )
    return Launcher(root / "prefix", {"RLAUNCH_RUNTIME_PLUGINS": "copied_marker", "PYTHONPATH": f"{plugins}:{REPO}"})


def release_copied_marker(root: Path) -> None:
    """A new release of the copied marker runtime: one more line in its adapter."""
    entry = root / "plugins" / "copied_marker" / "adapter" / "rlaunch_test_marker" / "entry.py"
    entry.write_text(entry.read_text() + "\n# a new runtime release\n")


def replay_refused_through(launcher: Launcher, backend: str) -> dict[str, object]:
    """Submit `tests.experiments.env_read` with $MARKER_TRAINING_STEPS=6, which its coordinator on
    `backend` is not given, and check what every backend shows: the coordinator refuses before
    anything is built, naming the step, the fingerprint the plan showed with the variable and the one
    it shows without it, the field and the variable, and the RL step's run record keeps both with no
    attempt. Returns the record's refusal."""
    from tests.experiments.env_read import STEPS_ENV

    args = ("-m", "tests.experiments.env_read", "--version", SMOKE_VERSION, "--backend", backend)
    judged, replayed = (
        _rl_fingerprint(launcher.run(*args, "--plan-format", "json", env=env)) for env in ({STEPS_ENV: "6"}, {})
    )
    done = launcher.run(*args, "--run", env={STEPS_ENV: "6"}, timeout=600)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    run = f"marker/rl@{SMOKE_VERSION}"
    assert (
        f"{run}: judged with fingerprint {judged}, but the coordinator's replay built fingerprint {replayed}; the "
        "first field that differs is config.launch_document.skyrl.trainer.max_training_steps (6 judged, 4 replayed)"
    ) in output
    assert f"the graph read ${STEPS_ENV} while it was built, and it is unset in the coordinator" in output
    assert "Nothing was built." in output
    rl = launcher.prefix / "marker" / "rl" / SMOKE_VERSION
    record = json.loads((rl / "run_record.json").read_text())
    assert record["attempts"] == [] and [p.name for p in rl.iterdir() if not p.name.startswith(".")] == [
        "run_record.json"
    ]  # and its lock
    assert not (launcher.prefix / "marker" / "model").exists()  # its inputs were not built either
    (refusal,) = record["replay_refusals"]
    assert refusal["steps"] == [
        {
            "identity": run,
            "judged": judged,
            "replayed": replayed,
            "field": "config.launch_document.skyrl.trainer.max_training_steps",
        }
    ]
    assert refusal["environment"] == {STEPS_ENV: "unset in the coordinator"}
    assert f"submitted RL coordinator {refusal['coordinator_job_id']} " in done.stdout
    status = launcher.run("-m", "rlaunch", "status", run)
    (state,) = [line for line in status.stdout.splitlines() if line.startswith("state ")]
    assert state.split()[1] == "refused" and judged in state and replayed in state, status.stdout + status.stderr
    return dict(refusal)


def _rl_fingerprint(plan: subprocess.CompletedProcess[str]) -> str:
    """The RL step's fingerprint in a `--plan-format json` dry run."""
    assert plan.returncode == 0, plan.stderr
    (step,) = [s for s in json.loads(plan.stdout)["steps"] if s["identity"] == f"marker/rl@{SMOKE_VERSION}"]
    fingerprint: str = step["fingerprint"]
    return fingerprint


def marker_sweep_through(launcher: Launcher, backend: str) -> tuple[str, dict[str, dict[str, Any]]]:
    """A two-value sweep of the marker experiment on `backend` as one submission: one coordinator,
    each variant its own artifact whose run record carries the sweep and a succeeded attempt of that
    coordinator. Returns the sweep's name and each variant's latest attempt."""
    grid = ("--sweep", "trainer.policy.optimizer_config.lr=1e-3,2e-3")
    args = ("-m", "tests.experiments.marker", "--version", SMOKE_VERSION, "--backend", backend, *grid)
    plan = launcher.run(*args, "--plan-format", "json", timeout=300)
    assert plan.returncode == 0, plan.stdout[-2000:] + plan.stderr[-2000:]
    sweep = json.loads(plan.stdout)["sweep"]["name"]
    done = launcher.run(*args, "--run", timeout=1200)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert done.stdout.count("submitted RL coordinator") == 1, done.stdout[-4000:]
    attempts = {}
    for label, rate in (("lr-1e-3", 1e-3), ("lr-2e-3", 2e-3)):
        record = json.loads(
            (launcher.prefix / "marker" / f"rl.{label}" / SMOKE_VERSION / "run_record.json").read_text()
        )
        assert record["sweep"] == {
            "name": sweep,
            "variant": label,
            "settings": {"trainer.policy.optimizer_config.lr": rate},
        }
        (attempt,) = record["attempts"]
        assert attempt["backend"] == backend and attempt["state"] == "succeeded", attempt
        attempts[label] = attempt
    assert len({a["coordinator_job_id"] for a in attempts.values()}) == 1  # one submission
    assert len({a["child_job_id"] for a in attempts.values()}) == 2  # a gang each
    return sweep, attempts
