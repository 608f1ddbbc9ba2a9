"""Time staging a multi-GiB model against a plain copy of the same files.

    .venv/bin/python benchmarks/staging.py [--gib 2] [--files 4] [--repeat 3] [--scratch /tmp/rlaunch-stagebench]

Writes a model directory of `--files` shards totalling `--gib` GiB (random bytes) with its
artifact record listing every shard's sha256, then alternates `cp -r` of the directory and
`rlaunch.task.staging.stage` (identity check, parallel copy hashing as it goes, every checksum
verified, rename into place; with `--unlisted` the record lists no checksums, so staging copies in
the kernel as `cp` does), `--repeat` times each, dropping each copy before the next, and times
hashing the same files alone (hashlib, one thread, 256 KiB reads), the floor of any verified staging where `cp` copies
inside the kernel without touching the bytes. Prints the medians, the median of the rounds'
paired ratios against `cp -r` (target: staging at most 1.2), each side's CPU seconds (user and
system, every thread and child: what a machine shared with other work cannot hide) and the load
average. The source stays in the page cache after the first round, as a node's local disk would
keep it; every side reads it the same way.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from rlaunch.artifacts import records  # noqa: E402
from rlaunch.task.staging import stage  # noqa: E402


def make_model(source: Path, gib: float, files: int, *, listed: bool = True) -> str:
    source.mkdir(parents=True)
    size = int(gib * (1 << 30)) // files
    checksums = {}
    block = os.urandom(1 << 20)
    for i in range(files):
        digest = hashlib.sha256()
        with open(source / f"model-{i:05d}-of-{files:05d}.safetensors", "wb") as out:
            for n in range(size >> 20):
                data = block[n % 256 :] + block[: n % 256]  # no two MiB alike
                out.write(data)
                digest.update(data)
        checksums[f"model-{i:05d}-of-{files:05d}.safetensors"] = digest.hexdigest()
    fingerprint = "b" * 64
    records.write_record(
        str(source),
        {
            "name": "models/bench",
            "version": "1",
            "fingerprint": fingerprint,
            "result": {"files": checksums if listed else {}},
        },
    )
    return f"models/bench@1:{fingerprint}"


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def timed(run: Callable[[], object], who: int = resource.RUSAGE_SELF) -> tuple[float, float]:
    """(wall, CPU) seconds of `run()`; CPU of this process (every thread) or of its children."""
    cpu, started = cpu_seconds(who), time.monotonic()
    run()
    return time.monotonic() - started, cpu_seconds(who) - cpu


def hash_shards(shards: list[str]) -> None:
    for shard in shards:
        digest = hashlib.sha256()
        with open(shard, "rb") as handle:
            for chunk in iter(lambda handle=handle: handle.read(256 << 10), b""):
                digest.update(chunk)


def median_of(label: str, runs: list[tuple[float, float]]) -> tuple[float, float]:
    wall, cpu = statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)
    print(f"  {label:9s}{wall:6.2f} s   cpu {cpu:5.2f} s   ({', '.join(f'{r[0]:.2f}' for r in runs)})")
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scratch", default="/tmp/rlaunch-stagebench")
    parser.add_argument(
        "--unlisted", action="store_true", help="the record lists no checksums: staging copies in the kernel, unhashed"
    )
    args = parser.parse_args()
    scratch = Path(args.scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    source, task = scratch / "model", scratch / "task"
    identity = make_model(source, args.gib, args.files, listed=not args.unlisted)
    task.mkdir()
    copies: list[tuple[float, float]] = []
    stages: list[tuple[float, float]] = []
    hashes: list[tuple[float, float]] = []
    shards = sorted(str(p) for p in source.iterdir() if p.name.endswith(".safetensors"))
    plain = ["cp", "-r", str(source), str(task / "plain")]
    load = os.getloadavg()
    try:
        for _ in range(args.repeat):
            copies.append(timed(lambda: subprocess.run(plain, check=True), resource.RUSAGE_CHILDREN))
            shutil.rmtree(task / "plain")
            stages.append(
                timed(lambda: stage(str(source), identity, str(task / "staged"), lambda m: None, root=str(task)))
            )
            shutil.rmtree(task / "staged")
            hashes.append(timed(lambda: hash_shards(shards)))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    unlisted = ", no checksums listed" if args.unlisted else ""
    print(
        f"{args.gib:g} GiB in {args.files} files{unlisted}, {args.repeat} rounds (medians), load average {load[0]:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    copy_m, copy_cpu = median_of("cp -r", copies)
    stage_cpu = median_of("stage", stages)[1]
    hash_m, hash_cpu = median_of("hash only", hashes)
    paired = statistics.median(s[0] / c[0] for s, c in zip(stages, copies, strict=True))
    print(f"  ratio    {paired:6.2f}   stage / cp -r, median of the rounds' pairs (target: at most 1.2)")
    print(f"  cpu      {stage_cpu / copy_cpu:6.2f}   stage / cp -r in CPU seconds")
    print(
        f"  floor    {hash_m / copy_m:6.2f}   hash only / cp -r (hashing alone, one thread; {hash_cpu / copy_cpu:.2f} in CPU)"
    )


if __name__ == "__main__":
    main()
