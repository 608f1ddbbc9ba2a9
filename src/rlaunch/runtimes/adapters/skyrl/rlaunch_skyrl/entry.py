"""`run(cfg.skyrl)` for upstream SkyRL 0.4.0: `python -m rlaunch_skyrl.entry --config FINAL.yaml`.

Guards the checkpoint root (runtime digest), runs SkyRL's experiment with rlaunch's evidence
callbacks (`rlaunch_skyrl.driver`: the synchronous trainer, or the fully-async one for the
`fully_async` entrypoint), then mirrors the checkpoints into rlaunch's layout. rlaunch context
comes from the task bootstrap's environment: RLAUNCH_RUNTIME_DIGEST, RLAUNCH_RUN_FINGERPRINT,
RLAUNCH_COMPATIBLE_DIGESTS, RLAUNCH_RESUME_FROM (a pinned checkpoint to start from),
RLAUNCH_ATTEMPT_DIR, RLAUNCH_MODEL_IDENTITY.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Mapping
from typing import Any

import yaml

from rlaunch_skyrl.checkpoints import (
    RESUME_FROM_ENV,
    ForeignCheckpointError,
    guard,
    mirror,
    resume_settings,
    start_from_pin,
)

MODES = ("standard", "fully_async")


def run(document: Mapping[str, Any], mode: str = "standard") -> int:
    digest = os.environ["RLAUNCH_RUNTIME_DIGEST"]
    fingerprint = os.environ.get("RLAUNCH_RUN_FINGERPRINT", "")
    compatible = [d for d in os.environ.get("RLAUNCH_COMPATIBLE_DIGESTS", "").split(",") if d]
    ckpt_root, resume_mode = resume_settings(document["skyrl"])
    try:
        document = start_from_pin(document, os.environ.get(RESUME_FROM_ENV, ""))  # before the root is claimed
        guard(ckpt_root, resume_mode, digest, compatible, fingerprint)
    except ForeignCheckpointError as exc:
        print(f"[rlaunch_skyrl] refused: {exc}", file=sys.stderr, flush=True)
        return 2
    from rlaunch_skyrl.driver import run as train

    code = 0
    try:
        train(document, mode)
    except Exception:  # SkyRL's failure, reported with its traceback; the checkpoints are still mirrored
        traceback.print_exc()
        code = 1
    step = mirror(ckpt_root, digest, fingerprint)
    print(
        f"[rlaunch_skyrl] SkyRL ended ({'ok' if code == 0 else 'failed'}); latest checkpoint step {step}",
        file=sys.stderr,
        flush=True,
    )
    return code


def main(mode: str = "standard") -> None:
    parser = argparse.ArgumentParser(
        prog=f"python -m rlaunch_skyrl.entry{'_fully_async' if mode != 'standard' else ''}"
    )
    parser.add_argument("--config", required=True, help="the task-local launch document")
    args = parser.parse_args()
    with open(args.config, encoding="utf-8") as handle:
        document = yaml.safe_load(handle)
    sys.exit(run(document, mode))


if __name__ == "__main__":
    main()
