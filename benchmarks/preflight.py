"""How fast a broken RL plan is refused: cold (a fresh process) and warm (check_plan throughput).

    python benchmarks/preflight.py                 # defaults: 7 cold runs, 2 s per throughput point
    python benchmarks/preflight.py --cold 11 --seconds 5

Cold: wall time from starting a fresh interpreter to its verdict on a broken plan, for
  * `python -c pass`: the interpreter alone, the yardstick;
  * `python -c`: import rlaunch.skyrl, build the seed's 64-GPU plan with rollout DP 1 and bad
    batch sizes, call check_plan, print the violation codes (the ratio to `pass` should stay <= 5);
  * `python -m experiments.rl_plan_example --broken`: the same through the experiment CLI (graph,
    SkyRLSpec, plan), exiting non-zero with every violation.
The three run interleaved (one of each per round), so a busy machine slows them alike, and the
medians are compared. Bytecode is cached as for any user (in a temporary PYTHONPYCACHEPREFIX,
warmed by one untimed run each), even where PYTHONDONTWRITEBYTECODE is set: the dry run a
researcher repeats does not recompile rlaunch every time.
Warm: check_plan calls per second in one process, for valid and broken plans on each profile.
Nothing here touches storage except the empty temporary prefix the example is pointed at.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

COLD_SNIPPET = """
from rlaunch.skyrl import SkyRLRolePlan, SkyRLTopology, check_plan
plan = SkyRLRolePlan(colocate_all=False, policy_num_nodes=4, policy_num_gpus_per_node=8, num_inference_engines=4,
    inference_engine_tensor_parallel_size=1, inference_engine_pipeline_parallel_size=1, inference_engine_data_parallel_size=1,
    inference_engine_expert_parallel_size=1, train_batch_size=250, policy_mini_batch_size=64,
    micro_train_batch_size_per_gpu=3, n_samples_per_prompt=8)
recipe = {"trainer": {"max_prompt_length": 1024, "ckpt_interval": 20, "hf_save_interval": -1, "resume_mode": "latest",
    "logger": "console"}, "generator": {"sampling_params": {"max_generate_length": 3072}}}
found = check_plan(SkyRLTopology(num_nodes=8, gpus_per_node=8, gpu_variant="H100", role_plan=plan), recipe, "fsdp")
print(",".join(v.code for v in found))
"""

EXPECTED_COLD = {"topology.gpu_budget", "batch.train_mini", "batch.per_gpu_mini_micro", "batch.tail_stride"}


def _env(prefix: str, pycache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RLAUNCH_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["RLAUNCH_PREFIX"] = prefix
    env["PYTHONPYCACHEPREFIX"] = pycache
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "src"), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


Check = Callable[[subprocess.CompletedProcess[str]], None]


def cold(commands: dict[str, tuple[list[str], Check]], runs: int) -> dict[str, list[float]]:
    """Wall milliseconds from process start to exit per command (the verdict is the last output).

    One untimed run of each warms the bytecode cache; then `runs` rounds of one run each.
    """
    times: dict[str, list[float]] = {label: [] for label in commands}
    with tempfile.TemporaryDirectory(prefix="rlaunch-preflight-bench-") as scratch:
        env = _env(os.path.join(scratch, "prefix"), os.path.join(scratch, "pycache"))
        for round_ in range(runs + 1):
            for label, (argv, check) in commands.items():
                start = time.perf_counter()
                done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
                elapsed = (time.perf_counter() - start) * 1e3
                check(done)
                if round_:
                    times[label].append(elapsed)
    return times


def _check_snippet(done: subprocess.CompletedProcess[str]) -> None:
    codes = set(done.stdout.strip().split(","))
    if done.returncode != 0 or not EXPECTED_COLD <= codes:
        raise AssertionError(f"unexpected verdict: rc={done.returncode} {done.stdout!r} {done.stderr[-2000:]!r}")


def _check_example(done: subprocess.CompletedProcess[str]) -> None:
    if done.returncode == 0 or "[topology.gpu_budget]" not in done.stderr or "[batch.tail_stride]" not in done.stderr:
        raise AssertionError(
            f"expected a refusal listing every violation: rc={done.returncode} {done.stderr[-2000:]!r}"
        )


def throughput(cases: list[tuple[Any, Any, str]], seconds: float, *, valid: bool) -> tuple[float, int]:
    """check_plan calls per second over `cases` (round robin) for about `seconds`."""
    from rlaunch.skyrl import check_plan

    for topology, recipe, profile in cases:  # warm (profiles load once per process) and verify
        found = check_plan(topology, recipe, profile)
        if bool(found) == valid:
            raise AssertionError(
                f"expected a {'valid' if valid else 'broken'} plan on {profile}, got {[v.code for v in found]}"
            )
    calls = 0
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for topology, recipe, profile in cases:
            check_plan(topology, recipe, profile)
        calls += len(cases)
    return calls / (time.perf_counter() - start), calls


def plans() -> dict[str, list[tuple[Any, Any, str]]]:
    from rlaunch.skyrl import SkyRLRolePlan, SkyRLTopology

    recipe = {
        "trainer": {
            "algorithm": {"use_kl_loss": True},
            "max_prompt_length": 1024,
            "ckpt_interval": 20,
            "hf_save_interval": -1,
            "resume_mode": "latest",
            "logger": "console",
        },
        "generator": {"sampling_params": {"max_generate_length": 3072}},
    }
    broken_recipe = {
        **recipe,
        "trainer": {**recipe["trainer"], "ckpt_path": "/ambient", "strategy": "megatron", "ckpt_intervall": 3},
    }

    def role_plan(**changes: Any) -> SkyRLRolePlan:
        values: dict[str, Any] = dict(
            colocate_all=False, policy_num_nodes=4, policy_num_gpus_per_node=8, num_inference_engines=4,
            inference_engine_tensor_parallel_size=1, inference_engine_pipeline_parallel_size=1,
            inference_engine_data_parallel_size=8, inference_engine_expert_parallel_size=1,
            train_batch_size=256, policy_mini_batch_size=64, micro_train_batch_size_per_gpu=2, n_samples_per_prompt=8,
        )  # fmt: skip
        values.update(changes)
        return SkyRLRolePlan(**values)

    def topo(n: int, g: int, variant: str = "H100", **changes: Any) -> SkyRLTopology:
        return SkyRLTopology(num_nodes=n, gpus_per_node=g, gpu_variant=variant, role_plan=role_plan(**changes))

    colocated = dict(
        colocate_all=True,
        policy_num_nodes=1,
        num_inference_engines=8,
        inference_engine_data_parallel_size=1,
        train_batch_size=64,
        policy_mini_batch_size=32,
    )
    cpu = dict(colocate_all=True, policy_num_nodes=1, policy_num_gpus_per_node=1, num_inference_engines=1, inference_engine_data_parallel_size=1,
               train_batch_size=4, policy_mini_batch_size=4, micro_train_batch_size_per_gpu=4, n_samples_per_prompt=4)  # fmt: skip
    megatron = {
        **recipe,
        "trainer": {
            **recipe["trainer"],
            "policy": {"megatron_config": {"tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2}},
        },
    }
    return {
        "valid": [
            (topo(8, 8), recipe, "fsdp"),
            (topo(8, 8, inference_engine_expert_parallel_size=8), recipe, "fsdp"),
            (topo(1, 8, **colocated), recipe, "fsdp"),
            (topo(8, 8), megatron, "megatron"),
            (topo(1, 1, "cpu", **cpu), recipe, "trl-cpu"),
        ],
        "broken": [
            (
                topo(
                    8, 8, inference_engine_data_parallel_size=1, train_batch_size=250, micro_train_batch_size_per_gpu=3
                ),
                recipe,
                "fsdp",
            ),
            (topo(8, 8, inference_engine_expert_parallel_size=3), broken_recipe, "fsdp"),
            (
                topo(1, 8, **{**colocated, "inference_engine_tensor_parallel_size": 3, "num_inference_engines": 3}),
                recipe,
                "fsdp",
            ),
            (
                topo(
                    1,
                    8,
                    **{**colocated, "train_batch_size": 12, "policy_mini_batch_size": 12, "n_samples_per_prompt": 1},
                ),
                megatron,
                "megatron",
            ),
            (
                topo(
                    2,
                    2,
                    "H100",
                    **{
                        **cpu,
                        "colocate_all": False,
                        "policy_num_gpus_per_node": 2,
                        "inference_engine_tensor_parallel_size": 2,
                    },
                ),
                recipe,
                "trl-cpu",
            ),
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", type=int, default=7, help="fresh processes per cold measurement (>= 5)")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds per throughput measurement")
    args = parser.parse_args(argv)
    sys.path[:0] = [str(REPO / "src")]

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cpu(s)")
    print("cold: process start -> verdict on a broken 64-GPU plan (interleaved rounds)")
    example_argv = ["-m", "experiments.rl_plan_example", "--version", "2026.11.30", "--stage", "rl", "--broken"]
    timings = cold(
        {
            "python -c pass (interpreter only)": ([sys.executable, "-c", "pass"], lambda done: None),
            "python -c check_plan(broken)": ([sys.executable, "-c", COLD_SNIPPET], _check_snippet),
            "python -m experiments.rl_plan_example --broken": ([sys.executable, *example_argv], _check_example),
        },
        max(args.cold, 1),
    )
    baseline = statistics.median(next(iter(timings.values())))
    for label, times in timings.items():
        median = statistics.median(times)
        print(
            f"  {label:<48} median {median:7.1f} ms   min {min(times):7.1f} ms   "
            f"ratio to pass {median / baseline:5.2f}   ({len(times)} runs)"
        )
    verdict = statistics.median(timings["python -c check_plan(broken)"])
    print(
        f"cold verdict / python -c pass: {verdict:.1f} ms / {baseline:.1f} ms = {verdict / baseline:.2f} (target <= 5)"
    )

    print("warm: check_plan throughput in one process")
    for label, cases in plans().items():
        rate, calls = throughput(cases, args.seconds, valid=label == "valid")
        print(f"  {label:<8} {rate:10.0f} plans/s   ({calls} calls over {len(cases)} plans, {1e6 / rate:7.1f} us/plan)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
