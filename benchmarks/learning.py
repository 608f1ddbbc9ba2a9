"""Does RL learn? The learning example (`experiments.learning`) on several seeds.

    python benchmarks/learning.py                  # seeds 0 1 2
    python benchmarks/learning.py --seeds 0 3 4
    python benchmarks/learning.py --seeds 10-19    # a range, both ends included

Each seed runs the whole example in a fresh temporary prefix (tokenizer, tiny Qwen3, data, the
supervised warm start, TRL GRPO through the trl-cpu runtime, two evaluation step jobs, the verdict)
and prints the accuracy before and after RL with their 95% intervals clustered by prompt, the lift
with its 95% interval (paired by prompt), whether it lies above 0 (`learned`) and the wall time;
then how many seeds learned of how many ran (a seed whose run failed did not learn) and the load
average before and after (the machine is shared: wall times follow its load). Nothing is asserted:
tests/launch/test_learning.py checks the direction on seed 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VERSION = "2026.12.04"


def run_seed(seed: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix=f"rlaunch-learning-{seed}-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RLAUNCH_")}
        env.update(RLAUNCH_PREFIX=str(Path(tmp) / "prefix"), RLAUNCH_STAGING_ROOT=str(Path(tmp) / "staging"))
        if os.environ.get("RLAUNCH_RUNTIME_CACHE"):
            env["RLAUNCH_RUNTIME_CACHE"] = os.environ["RLAUNCH_RUNTIME_CACHE"]
        started = time.monotonic()
        argv = [sys.executable, "-m", "experiments.learning", "--version", VERSION, "--seed", str(seed), "--run"]
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
        if done.returncode != 0:
            return {"seed": seed, "error": done.stderr[-2000:], "wall_s": wall}
        verdict = json.loads((Path(tmp) / "prefix" / "learning" / "verdict" / VERSION / "verdict.json").read_text())
        return {"seed": seed, **verdict, "wall_s": wall}


def seeds_of(token: str) -> list[int]:
    """A seed (`3`) or an inclusive range of them (`10-19`), as `--seeds` takes them."""
    match = re.fullmatch(r"(\d+)(?:-(\d+))?", token)
    if match is None or (match[2] is not None and int(match[2]) < int(match[1])):
        raise argparse.ArgumentTypeError(
            f"--seeds {token!r}: give a seed (3) or an increasing range of seeds, both ends included (10-19)"
        )
    first = int(match[1])
    return list(range(first, int(match[2] or first) + 1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=seeds_of, nargs="+", default=[[0], [1], [2]], help="seeds or ranges (10-19)")
    args = parser.parse_args()
    seeds = [seed for token in args.seeds for seed in token]
    load_before = os.getloadavg()[0]
    learned = 0
    print("seed  before  95% interval      after   95% interval      lift    95% interval        learned  wall")
    for seed in seeds:
        row = run_seed(seed)
        if "error" in row:
            print(f"{seed:<5} failed after {row['wall_s']:.0f}s:\n{row['error']}")
            continue
        lo, hi = row["before_interval"]
        alo, ahi = row["after_interval"]
        llo, lhi = row["lift_interval"]
        print(
            f"{seed:<5} {row['before']:.3f}   [{lo:.3f}, {hi:.3f}]    {row['after']:.3f}   [{alo:.3f}, {ahi:.3f}]"
            f"    {row['lift']:+.3f}  [{llo:+.3f}, {lhi:+.3f}]  {str(row['learned']):<8} {row['wall_s']:.0f}s",
            flush=True,
        )
        learned += row["learned"] is True
    print(
        f"learned on {learned} of {len(seeds)} seeds; load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
