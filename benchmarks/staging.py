"""Time staging a multi-GiB model against a plain copy of the same files.

    .venv/bin/python benchmarks/staging.py [--gib 2] [--files 4] [--repeat 3] [--scratch /tmp/rlaunch-stagebench]

Writes a model directory of `--files` shards totalling `--gib` GiB (random bytes) with its
artifact record listing every shard's sha256, then alternates `cp -r` of the directory and
`rlaunch.task.staging.stage` (identity check, parallel copy hashing as it goes, every checksum
verified, rename into place), `--repeat` times each, dropping each copy before the next, and times
hashing the same files alone (hashlib, one thread, 256 KiB reads), the floor of any verified staging where `cp` copies
inside the kernel without touching the bytes. Prints the medians and the ratios against `cp -r`
(target: staging at most 1.2). The source stays in the page cache after the first round, as a
node's local disk would keep it; every side reads it the same way.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from rlaunch.artifacts import records  # noqa: E402
from rlaunch.task.staging import stage  # noqa: E402


def make_model(source: Path, gib: float, files: int) -> str:
    source.mkdir(parents=True)
    size = int(gib * (1 << 30)) // files
    listed = {}
    block = os.urandom(1 << 20)
    for i in range(files):
        digest = hashlib.sha256()
        with open(source / f"model-{i:05d}-of-{files:05d}.safetensors", "wb") as out:
            for n in range(size >> 20):
                data = block[n % 256 :] + block[: n % 256]  # no two MiB alike
                out.write(data)
                digest.update(data)
        listed[f"model-{i:05d}-of-{files:05d}.safetensors"] = digest.hexdigest()
    fingerprint = "b" * 64
    records.write_record(
        str(source), {"name": "models/bench", "version": "1", "fingerprint": fingerprint, "result": {"files": listed}}
    )
    return f"models/bench@1:{fingerprint}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, default=2.0)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scratch", default="/tmp/rlaunch-stagebench")
    args = parser.parse_args()
    scratch = Path(args.scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    source, task = scratch / "model", scratch / "task"
    identity = make_model(source, args.gib, args.files)
    task.mkdir()
    copy_s, stage_s, hash_s = [], [], []
    shards = sorted(str(p) for p in source.iterdir() if p.name.endswith(".safetensors"))
    try:
        for _ in range(args.repeat):
            started = time.monotonic()
            subprocess.run(["cp", "-r", str(source), str(task / "plain")], check=True)
            copy_s.append(time.monotonic() - started)
            shutil.rmtree(task / "plain")
            started = time.monotonic()
            stage(str(source), identity, str(task / "staged"), lambda m: None, root=str(task))
            stage_s.append(time.monotonic() - started)
            shutil.rmtree(task / "staged")
            started = time.monotonic()
            for shard in shards:
                digest = hashlib.sha256()
                with open(shard, "rb") as handle:
                    for chunk in iter(lambda handle=handle: handle.read(256 << 10), b""):
                        digest.update(chunk)
            hash_s.append(time.monotonic() - started)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    copy_m, stage_m, hash_m = statistics.median(copy_s), statistics.median(stage_s), statistics.median(hash_s)
    print(f"{args.gib:g} GiB in {args.files} files, {args.repeat} rounds (medians)")
    print(f"  cp -r    {copy_m:6.2f} s   ({', '.join(f'{s:.2f}' for s in copy_s)})")
    print(f"  stage    {stage_m:6.2f} s   ({', '.join(f'{s:.2f}' for s in stage_s)})")
    print(f"  hash only {hash_m:5.2f} s   ({', '.join(f'{s:.2f}' for s in hash_s)})")
    print(f"  ratio    {stage_m / copy_m:6.2f}   stage / cp -r (target: at most 1.2)")
    print(f"  floor    {hash_m / copy_m:6.2f}   hash only / cp -r (hashing alone, one thread)")


if __name__ == "__main__":
    main()
