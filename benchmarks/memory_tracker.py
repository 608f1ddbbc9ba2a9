"""The training and reference rows beside PyTorch's own accounting of the same step, on the CPU.

    .venv/bin/python benchmarks/memory_tracker.py [--family qwen3-8b ...] [--world 4 ...] [--json out.json]

Runs the grid of tests/runtimes/memtracker_grid.py (every supported family at published widths,
truncated in layers; FSDP over 1 and 4 fake ranks; micro batch, sequence length, checkpointing) in
the trl-cpu runtime's venv (built once if missing, outside the timings): `FSDPMemTracker` under
`FakeTensorMode` allocates nothing. Prints per case the tracker's forward/backward and
optimizer-step peaks, rlaunch's training row and its error, the tracker's reference-forward peak,
rlaunch's reference row and its error, then the worst error of each row. The test tier
(tests/runtimes/test_memtracker.py) holds every error within 10 %. The per-rank peaks are
`torch.cuda.max_memory_allocated`'s quantity, so a GPU measurement of the same case compares
directly (allocator caching and the CUDA context are not in either); `--json` writes every case
(its config, ranks, micro batch, sequence length, checkpointing), the tracker's peaks and
rlaunch's rows in bytes, for that comparison.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rlaunch.runtimes.environment import ensure_environment  # noqa: E402
from rlaunch.runtimes.registry import get_profile  # noqa: E402
from tests.runtimes.memtracker_grid import GRID, error, measure, rows  # noqa: E402

GIB = 2**30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", help="only these families (default: all)")
    parser.add_argument("--world", action="append", type=int, help="only these FSDP sizes (default: all)")
    parser.add_argument("--json", type=Path, help="also write every case and its numbers (bytes) here")
    args = parser.parse_args()
    cases = tuple(
        c for c in GRID if (not args.family or c.family in args.family) and (not args.world or c.world in args.world)
    )
    env = ensure_environment(get_profile("trl-cpu"))
    started = time.monotonic()
    measured = measure(env.python, cases)
    seconds = time.monotonic() - started
    print(f"{'case':48} {'fwd/bwd':>8} {'opt':>7} {'train':>7} {'err':>6}   {'ref':>6} {'rlaunch':>7} {'err':>6}  GiB")
    worst = {"training": (0.0, ""), "reference": (0.0, "")}
    records = []
    for case in cases:
        got = measured[case]
        train, ref = rows(case)
        records.append(
            {
                **case.as_json(),
                "name": case.name,
                "tracker": {k: got[k] for k in ("train_fb", "train_opt", "reference")},
                "rlaunch": {"training": train.estimate, "reference": ref.estimate},
            }
        )
        peak = max(got["train_fb"], got["train_opt"])
        errors = {"training": error(train.estimate, peak), "reference": error(ref.estimate, got["reference"])}
        for row, e in errors.items():
            if abs(e) > abs(worst[row][0]):
                worst[row] = (e, case.name)
        print(
            f"{case.name:48} {got['train_fb'] / GIB:8.2f} {got['train_opt'] / GIB:7.2f} {train.estimate / GIB:7.2f} "
            f"{errors['training']:+6.1%}   {got['reference'] / GIB:6.2f} {ref.estimate / GIB:7.2f} {errors['reference']:+6.1%}"
        )
    for row, (e, name) in worst.items():
        print(f"worst {row} error: {e:+.1%} ({name})")
    print(f"{len(cases)} cases tracked in {seconds:.0f} s")
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
