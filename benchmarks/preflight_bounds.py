"""The preflight is bounded: the slowest `check_plan` over adversarial sizes, against a 10 ms budget.

Batch sizes of 2**40, 5*10**7 and large primes (whose divisors a fix lists), parallel sizes of 0,
negative and beyond 2**62, on every bundled runtime. Prints the median and worst time of each
input (after one warm-up call that parses the runtime profiles) and the slowest median / budget
ratio (at most 1.0 means every verdict arrives within 10 ms; single worst times on a shared
machine are mostly scheduling noise).

    .venv/bin/python benchmarks/preflight_bounds.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlaunch.skyrl import check_plan  # noqa: E402
from tests.support.specs import BASE_RECIPE, cpu_topology, plan, recipe, seed_topology, topology  # noqa: E402

BUDGET_S = 0.010
PRIME = 2**61 - 1


def cases() -> dict[str, tuple[Any, dict[str, Any], str]]:
    megatron = recipe(trainer={"policy": {"megatron_config": {"tensor_model_parallel_size": 0}}})
    return {
        "train 2**40": (topology(plan(train_batch_size=2**40 + 2)), BASE_RECIPE, "fsdp"),
        "train 5*10**7": (topology(plan(train_batch_size=5 * 10**7 + 1)), BASE_RECIPE, "fsdp"),
        "train prime 2**61-1": (topology(plan(train_batch_size=PRIME)), BASE_RECIPE, "fsdp"),
        "mini prime, micro 3": (topology(plan(train_batch_size=PRIME, policy_mini_batch_size=PRIME, micro_train_batch_size_per_gpu=3)), BASE_RECIPE, "fsdp"),
        "nodes 2**61 x width prime": (topology(num_nodes=2**61, gpus_per_node=PRIME), BASE_RECIPE, "fsdp"),
        "tp 0 (was ZeroDivisionError)": (seed_topology(inference_engine_tensor_parallel_size=0), BASE_RECIPE, "fsdp"),
        "every size negative": (topology(plan(**{k: -7 for k in ("policy_num_nodes", "train_batch_size", "n_samples_per_prompt")}), num_nodes=-1), BASE_RECIPE, "fsdp"),
        "sizes beyond 2**62": (topology(plan(train_batch_size=2**400), num_nodes=2**300), BASE_RECIPE, "fsdp"),
        "megatron tp 0": (seed_topology(), megatron, "megatron"),
        "trl-cpu, 5*10**7": (cpu_topology(plan(colocate_all=True, policy_num_gpus_per_node=1, num_inference_engines=1, train_batch_size=5 * 10**7)), BASE_RECIPE, "trl-cpu"),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    worst_overall = 0.0
    print(f"{'input':<32} {'median ms':>10} {'worst ms':>10}  verdict")
    for label, (topo, tree, profile) in cases().items():
        times, found = [], check_plan(topo, tree, profile, seed=17)
        for _ in range(args.repeat):
            start = time.perf_counter()
            found = check_plan(topo, tree, profile, seed=17)
            times.append(time.perf_counter() - start)
        worst_overall = max(worst_overall, statistics.median(times))
        verdict = ", ".join(sorted({v.code for v in found})) or "accepted"
        print(f"{label:<32} {statistics.median(times) * 1e3:>10.3f} {max(times) * 1e3:>10.3f}  {verdict}")
    print(f"slowest median / budget ({BUDGET_S * 1e3:.0f} ms): {worst_overall / BUDGET_S:.2f}")


if __name__ == "__main__":
    main()
