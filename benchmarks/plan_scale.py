"""How planning scales with graph size: chains and wide fan-in graphs of 10, 100 and 1000 steps.

    python benchmarks/plan_scale.py            # default sizes 10 100 1000
    python benchmarks/plan_scale.py 10 5000    # other sizes

Every graph is planned against an empty temporary prefix (so every step is looked up in storage
and found missing, the dry-run worst case). Prints the time to construct the handles and to plan
them, in total and per step. Planning 1000 steps should take well under a second.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from rlaunch.artifacts import ArtifactStep, Directory, StepContext, plan_graph

VERSION = "2026.11.30"


def _noop(config: Any) -> None:
    return None


def _config(index: int, deps: tuple[ArtifactStep[Any], ...]) -> Callable[[StepContext], Any]:
    def build(ctx: StepContext) -> dict[str, Any]:
        return {
            "output_path": ctx.output_path,
            "index": index,
            "learning_rate": 1e-5,
            "inputs": [ctx.artifact_path(dep) for dep in deps],
        }

    return build


def _step(index: int, deps: tuple[ArtifactStep[Any], ...]) -> ArtifactStep[Directory]:
    return ArtifactStep(
        name=f"bench/step-{index:05d}",
        version=VERSION,
        artifact_type=Directory,
        run=_noop,
        build_config=_config(index, deps),
        deps=deps,
    )


def chain(n: int) -> list[ArtifactStep[Any]]:
    """step 0 <- step 1 <- ... <- step n-1; returns the terminal step."""
    step = _step(0, ())
    for i in range(1, n):
        step = _step(i, (step,))
    return [step]


def fan_in(n: int) -> list[ArtifactStep[Any]]:
    """n-1 independent leaves feeding one sink."""
    leaves = tuple(_step(i, ()) for i in range(n - 1))
    return [_step(n - 1, leaves)]


SHAPES: dict[str, Callable[[int], list[ArtifactStep[Any]]]] = {"chain": chain, "fan-in": fan_in}


def measure(shape: str, n: int, prefix: str) -> tuple[float, float]:
    start = time.perf_counter()
    roots = SHAPES[shape](n)
    built = time.perf_counter()
    planned = plan_graph(roots, prefix)
    done = time.perf_counter()
    if len(planned) != n or any(p.action != "run" for p in planned):
        raise AssertionError(f"{shape}/{n}: expected {n} steps to run, got {len(planned)}")
    return built - start, done - built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[10, 100, 1000])
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs per point")
    args = parser.parse_args(argv)

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpu(s); best of {args.repeat}")
    print(f"{'shape':<8} {'steps':>6} {'build ms':>10} {'plan ms':>10} {'plan us/step':>13} {'vs smallest':>12}")
    worst_1000 = 0.0
    for shape in SHAPES:
        base_per_step: float | None = None
        for n in args.sizes:
            best_build, best_plan = float("inf"), float("inf")
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory(prefix="rlaunch-bench-") as prefix:
                    build_s, plan_s = measure(shape, n, prefix)
                best_build, best_plan = min(best_build, build_s), min(best_plan, plan_s)
            per_step = best_plan / n
            base_per_step = base_per_step or per_step
            if n == 1000:
                worst_1000 = max(worst_1000, best_plan)
            print(
                f"{shape:<8} {n:>6} {best_build * 1e3:>10.2f} {best_plan * 1e3:>10.2f} "
                f"{per_step * 1e6:>13.1f} {per_step / base_per_step:>11.2f}x"
            )
    if worst_1000:
        verdict = "ok" if worst_1000 < 0.5 else "TOO SLOW"
        print(f"planning 1000 steps: {worst_1000 * 1e3:.0f} ms (target well under 1 s): {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
