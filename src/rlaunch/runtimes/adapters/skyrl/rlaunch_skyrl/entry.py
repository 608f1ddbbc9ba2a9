"""`run(cfg.skyrl)` for upstream SkyRL 0.4.0: `python -m rlaunch_skyrl.entry --config FINAL.yaml`.

Guards the checkpoint root (runtime digest), hands the composed recipe to SkyRL's entrypoint as a
dotlist (`skyrl.train.entrypoints.main_base`, or this adapter's fully-async driver), then mirrors
the checkpoints into rlaunch's layout. rlaunch context comes from the task bootstrap's
environment: RLAUNCH_RUNTIME_DIGEST, RLAUNCH_RUN_FINGERPRINT, RLAUNCH_COMPATIBLE_DIGESTS.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import yaml

from rlaunch_skyrl.checkpoints import ForeignCheckpointError, guard, mirror, resume_settings
from rlaunch_skyrl.dotlist import to_dotlist

ENTRYPOINTS = {
    "standard": "skyrl.train.entrypoints.main_base",
    "fully_async": "rlaunch_skyrl.fully_async",
}


def run(skyrl: Mapping[str, Any], mode: str = "standard") -> int:
    digest = os.environ["RLAUNCH_RUNTIME_DIGEST"]
    fingerprint = os.environ.get("RLAUNCH_RUN_FINGERPRINT", "")
    compatible = [d for d in os.environ.get("RLAUNCH_COMPATIBLE_DIGESTS", "").split(",") if d]
    ckpt_root, resume_mode = resume_settings(skyrl)
    try:
        guard(ckpt_root, resume_mode, digest, compatible, fingerprint)
    except ForeignCheckpointError as exc:
        print(f"[rlaunch_skyrl] refused: {exc}", file=sys.stderr, flush=True)
        return 2
    code = subprocess.call([sys.executable, "-m", ENTRYPOINTS[mode], *to_dotlist(skyrl)])
    step = mirror(ckpt_root, digest, fingerprint)
    print(f"[rlaunch_skyrl] SkyRL exited {code}; latest checkpoint step {step}", file=sys.stderr, flush=True)
    return code


def main(mode: str = "standard") -> None:
    parser = argparse.ArgumentParser(
        prog=f"python -m rlaunch_skyrl.entry{'_fully_async' if mode != 'standard' else ''}"
    )
    parser.add_argument("--config", required=True, help="the task-local launch document")
    args = parser.parse_args()
    with open(args.config, encoding="utf-8") as handle:
        document = yaml.safe_load(handle)
    sys.exit(run(document["skyrl"], mode))


if __name__ == "__main__":
    main()
