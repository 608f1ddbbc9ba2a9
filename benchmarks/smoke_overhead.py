"""What rlaunch adds around a real training run: the launched smoke against TRL run directly.

    python benchmarks/smoke_overhead.py

With the trl-cpu runtime cached, it times
  1. the launched smoke (`python -m experiments.smoke --stage rl --run`, fresh prefix: tokenizer,
     model, data and RL steps through coordinator, host, child job and task bootstrap);
  2. the launched RL step alone (its inputs served from storage: the launch overhead proper);
  3. the same training run directly: the trl-cpu entrypoint on the same task-local document,
     with fresh checkpoint and export roots, in the runtime's interpreter;
2 and 3 alternate `--repeat` times (default 3) and their medians are compared (a shared machine is
noisy). It prints the times, the ratios 1/3 and 2/3, the launcher's own seconds (the launched step
minus its trainer's run, which is the direct run's work) and the ratio they give on the median
direct run, and where the launched RL step's seconds went (the phase table its run record
carries; see `rlaunch.runs.run_record`). Last, it times `rlaunch status` on the finished
step in a fresh process (the target is under a second: status reads records and imports nothing heavy).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
VERSION = "2026.11.30"


def timed(argv: list[str], env: dict[str, str], bounds: list[str] | None = None) -> float:
    """Seconds `argv` took; `bounds` receives its start and end as ISO-8601 UTC."""
    from rlaunch.storage import utc_now

    began = utc_now()
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if bounds is not None:
        bounds[:] = [began, utc_now()]
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--repeat", type=int, default=3, help="launched / direct pairs, alternated (medians are compared)"
    )
    repeat = max(1, parser.parse_args().repeat)
    from rlaunch.observe.render import format_phase_table
    from rlaunch.runtimes.environment import ensure_environment
    from rlaunch.runtimes.registry import get_profile

    runtime = ensure_environment(get_profile("trl-cpu"))  # cached: built once, outside the timings
    launched: list[float] = []
    direct: list[float] = []
    tables: list[dict[str, str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "RLAUNCH_PREFIX": f"{tmp}/prefix",
            "RLAUNCH_STAGING_ROOT": f"{tmp}/stage",
            "RLAUNCH_KEEP_TASK_DIR": "1",
        }
        smoke = [sys.executable, "-m", "experiments.smoke", "--version", VERSION, "--stage", "rl", "--run"]
        full = timed(smoke, env)
        for n in range(1, repeat + 1):
            version = f"{VERSION}.{n}"
            bounds: list[str] = []
            launched.append(timed([*smoke, "--override", f"smoke/rl={version}"], env, bounds))
            (record_path,) = glob.glob(f"{tmp}/prefix/**/rl/{version}/run_record.json", recursive=True)
            phases = json.loads(Path(record_path).read_text())["attempts"][-1].get("phases") or {}
            tables.append({"launch_process_started": bounds[0], **phases, "launch_process_exited": bounds[1]})
            direct.append(_direct(runtime, f"{tmp}/stage/smoke-rl-{version}", f"{tmp}/direct-{n}"))
        status = [sys.executable, "-m", "rlaunch", "status", f"smoke/rl@{VERSION}.{repeat}"]
        rendered = [timed(status, env) for _ in range(5)]

    print(f"launched smoke (all steps, fresh prefix): {full:6.1f} s")
    print(f"launched RL step (inputs served):         {_runs(launched)}")
    print(f"same TRL training run directly:           {_runs(direct)}")
    print(f"ratio launched smoke / direct:            {full / statistics.median(direct):6.2f}")
    print(f"ratio launched RL step / direct:          {statistics.median(launched) / statistics.median(direct):6.2f}")
    # The launched step's trainer runs the same work as the direct run; what is left is the launcher's.
    own = [total - _trainer_seconds(table) for total, table in zip(launched, tables, strict=True)]
    print(f"launcher's own seconds (step - its trainer): {_runs(own)}")
    print(
        "ratio (direct + launcher's own) / direct:  "
        f"{(statistics.median(direct) + statistics.median(own)) / statistics.median(direct):6.2f}"
        "  (steadier than the raw ratio on a busy machine)"
    )
    middle = sorted(range(repeat), key=lambda i: launched[i])[repeat // 2]
    print(f"phases of the median launched RL step ({launched[middle]:.1f} s; + since the previous phase):")
    for line in format_phase_table(tables[middle]):
        print(f"  {line}")
    print(f"rlaunch status of the finished step (fresh process): {_runs(rendered)}  (target: under 1 s)")


def _trainer_seconds(phases: dict[str, str]) -> float:
    """How long the launched step's trainer process ran (trainer_started -> trainer_exited)."""
    from datetime import datetime

    started, exited = phases.get("trainer_started"), phases.get("trainer_exited")
    if not started or not exited:
        return 0.0
    return (datetime.fromisoformat(exited) - datetime.fromisoformat(started)).total_seconds()


def _runs(seconds: list[float]) -> str:
    return f"{statistics.median(seconds):6.1f} s median of " + ", ".join(f"{s:.1f}" for s in seconds)


def _direct(runtime: Any, stage: str, out: str) -> float:
    """The launched step's training run again, started directly: its task-local document, fresh outputs."""
    final = sorted(glob.glob(f"{stage}/*/replica-0/final-launch.yaml"))[-1]
    document = yaml.safe_load(Path(final).read_text())
    trainer = document["skyrl"]["trainer"]
    trainer["ckpt_path"], trainer["export_path"] = f"{out}/checkpoints", f"{out}/exports"
    os.makedirs(f"{out}/task", exist_ok=True)
    direct_doc = Path(out, "direct.yaml")
    direct_doc.write_text(yaml.safe_dump(document))
    direct_env = runtime.process_env(
        {
            "RLAUNCH_ATTEMPT_DIR": f"{out}/attempt",
            "RLAUNCH_TASK_DIR": f"{out}/task",
            "RLAUNCH_RUNTIME_DIGEST": document["runtime"]["source_digest"],
        },
        inherit=True,
    )
    return timed(runtime.command("rlaunch_trl_cpu.entry", ["--config", str(direct_doc)]), direct_env)


if __name__ == "__main__":
    main()
