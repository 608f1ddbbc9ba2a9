"""What rlaunch adds around a real training run: the launched smoke against TRL run directly.

    python benchmarks/smoke_overhead.py

With the trl-cpu runtime cached, it times
  1. the launched smoke (`python -m experiments.smoke --stage rl --run`, fresh prefix: tokenizer,
     model, data and RL steps through coordinator, host, child job and task bootstrap);
  2. the launched RL step alone (its inputs served from storage: the launch overhead proper);
  3. the same training run directly: the trl-cpu entrypoint on the same task-local document,
     with fresh checkpoint and export roots, in the runtime's interpreter;
and prints the times and the ratios 1/3 and 2/3.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
VERSION = "2026.11.30"


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return elapsed


def main() -> None:
    from rlaunch.runtimes.environment import ensure_environment
    from rlaunch.runtimes.registry import get_profile

    runtime = ensure_environment(get_profile("trl-cpu"))  # cached: built once, outside the timings
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "RLAUNCH_PREFIX": f"{tmp}/prefix",
            "RLAUNCH_STAGING_ROOT": f"{tmp}/stage",
            "RLAUNCH_KEEP_TASK_DIR": "1",
        }
        smoke = [sys.executable, "-m", "experiments.smoke", "--version", VERSION, "--stage", "rl", "--run"]
        full = timed(smoke, env)
        rl_only = timed([*smoke, "--override", "smoke/rl=2026.11.30.1"], env)

        final = sorted(glob.glob(f"{tmp}/stage/smoke-rl-2026.11.30.1/*/replica-0/final-launch.yaml"))[-1]
        document = yaml.safe_load(Path(final).read_text())
        trainer = document["skyrl"]["trainer"]
        trainer["ckpt_path"], trainer["export_path"] = f"{tmp}/direct/checkpoints", f"{tmp}/direct/exports"
        direct_doc = Path(tmp, "direct.yaml")
        direct_doc.write_text(yaml.safe_dump(document))
        direct_env = runtime.process_env(
            {
                "RLAUNCH_ATTEMPT_DIR": f"{tmp}/direct/attempt",
                "RLAUNCH_TASK_DIR": f"{tmp}/direct/task",
                "RLAUNCH_RUNTIME_DIGEST": document["runtime"]["source_digest"],
            },
            inherit=True,
        )
        os.makedirs(f"{tmp}/direct/task", exist_ok=True)
        direct = timed(runtime.command("rlaunch_trl_cpu.entry", ["--config", str(direct_doc)]), direct_env)

    print(f"launched smoke (all steps, fresh prefix): {full:6.1f} s")
    print(f"launched RL step (inputs served):         {rl_only:6.1f} s")
    print(f"same TRL training run directly:           {direct:6.1f} s")
    print(f"ratio launched smoke / direct:            {full / direct:6.2f}")
    print(f"ratio launched RL step / direct:          {rl_only / direct:6.2f}")


if __name__ == "__main__":
    main()
