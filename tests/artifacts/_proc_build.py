"""One runner process building a shared slow step (see test_processes.py).

    python _proc_build.py COUNTER_FILE

Environment: RLAUNCH_PREFIX (storage), PROC_SLEEP (seconds the step sleeps; not part of the
recipe), PROC_STARTED (a file created once the step body has started), PROC_RELEASE (if set,
the step body waits for this file instead of sleeping).
Prints one JSON line: the outcome of each executed step.
"""

from __future__ import annotations

import json
import os
import sys
import time

from rlaunch import storage
from rlaunch.artifacts import ArtifactStep, Directory, Runner


def slow(config):
    with open(config["counter"], "a") as handle:
        handle.write(f"{os.getpid()}\n")
        handle.flush()
    started = os.environ.get("PROC_STARTED")
    if started:
        open(started, "w").close()
    release = os.environ.get("PROC_RELEASE")
    if release:
        deadline = time.monotonic() + 60
        while not os.path.exists(release) and time.monotonic() < deadline:
            time.sleep(0.01)
    else:
        time.sleep(float(os.environ.get("PROC_SLEEP", "1")))
    storage.write_text_atomic(storage.join(config["output_path"], "result.txt"), "done")


def main() -> int:
    counter = sys.argv[1]
    step = ArtifactStep(
        name="shared/slow",
        version="2026.11.30",
        artifact_type=Directory,
        run=slow,
        build_config=lambda ctx: {"output_path": ctx.output_path, "counter": counter, "size": 3},
    )
    outcomes = Runner(poll_seconds=0.05, report=lambda m: print(m, file=sys.stderr)).run([step])
    print(json.dumps([o.action for o in outcomes]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
