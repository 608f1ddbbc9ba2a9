"""What the nearest-plans search costs a refused plan: `check_plan` on the 64-GPU example's two 24 GB
variants with the search and without it, and how many memory tables the search computed.

    .venv/bin/python benchmarks/what_fits.py [--repeat 20]

Prints timings; asserts nothing about speed (tests/rules/test_fit.py holds the evaluation bound).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from experiments import rl_plan_example as example  # noqa: E402
from rlaunch import rules  # noqa: E402
from rlaunch.rules import fit, memory  # noqa: E402
from rlaunch.skyrl import ModelFacts, check_plan  # noqa: E402
from rlaunch.skyrl.values.config_yaml import parse_config_yaml  # noqa: E402


def timed(variant: str, repeat: int, *, suggest: bool) -> list[float]:
    topology, recipe = example.topology(False, variant), parse_config_yaml(example.recipe(variant))
    model = ModelFacts.from_hf_config(example.QWEN3_8B_CONFIG)
    original = rules.with_nearest_fits
    if not suggest:
        rules.with_nearest_fits = lambda found, s, composed: found  # type: ignore[assignment]
    try:
        out = []
        for _ in range(repeat):
            start = time.perf_counter()
            check_plan(topology, recipe, "fsdp", seed=17, model=model)
            out.append(time.perf_counter() - start)
        return out
    finally:
        rules.with_nearest_fits = original  # type: ignore[assignment]


def tables_computed(variant: str) -> int:
    topology, recipe = example.topology(False, variant), parse_config_yaml(example.recipe(variant))
    model = ModelFacts.from_hf_config(example.QWEN3_8B_CONFIG)
    real, count = memory.table_for, [0]

    def counting(*args):  # type: ignore[no-untyped-def]
        count[0] += 1
        return real(*args)

    memory.table_for = counting  # type: ignore[assignment]
    try:
        check_plan(topology, recipe, "fsdp", seed=17, model=model)
    finally:
        memory.table_for = real  # type: ignore[assignment]
    return count[0]


@click.command()
@click.option("--repeat", default=20, show_default=True, type=click.IntRange(min=1))
def main(repeat: int) -> None:
    print(f"check_plan on a refused variant, median of {repeat} (search budget {fit.MAX_EVALUATIONS} tables)")
    for variant in ("one-node-24gb", "long-generation-24gb"):
        with_search = statistics.median(timed(variant, repeat, suggest=True))
        without = statistics.median(timed(variant, repeat, suggest=False))
        print(
            f"  {variant:<22} with the search {with_search * 1e3:7.1f} ms, without {without * 1e3:7.1f} ms, "
            f"memory tables {tables_computed(variant)}"
        )


if __name__ == "__main__":
    main()
