"""`python -m rlaunch_trl_cpu.entry --config FINAL.yaml`

FINAL.yaml (a local path or fsspec URL) is the full launch document, a mapping; its `skyrl`
section is the composed recipe handed to `trainer.run`, with its `code.reward` (the experiment's
shipped reward, if it names one). Exit status: 0 trained (or nothing left to
train), 2 refused before training (recipe, data, reward, or checkpoint digest; the reason is on
stderr), 1 crashed. Under torchrun (WORLD_SIZE > 1) the process leaves with `os._exit` after
flushing, skipping a torch.distributed teardown that can deadlock.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Any

REFUSED_EXIT = 2


def load_document(location: str) -> dict[str, Any]:
    import yaml

    from . import storage

    try:
        doc = yaml.safe_load(storage.read_text(location))
    except yaml.YAMLError as exc:
        raise ValueError(f"{location} is not valid YAML: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("skyrl"), dict):
        raise ValueError(f"{location}: a launch document is a mapping with a 'skyrl' mapping (the composed recipe)")
    return doc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rlaunch_trl_cpu.entry", description="trl-cpu runtime entrypoint")
    parser.add_argument("--config", required=True, help="the launch document (FINAL.yaml)")
    args = parser.parse_args(argv)

    from .checkpoints import ResumeRefused
    from .data import DataError
    from .recipe import RecipeRefused
    from .rewards import UnknownRewardError
    from .trainer import run

    try:
        doc = load_document(args.config)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"rlaunch_trl_cpu: cannot read the launch document: {exc}\n")
        return REFUSED_EXIT
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    try:
        run(
            doc["skyrl"],
            export_hf=bool((doc.get("run") or {}).get("export_hf")),
            reward=(doc.get("code") or {}).get("reward"),
        )
        code = 0
    except (RecipeRefused, ResumeRefused, DataError, UnknownRewardError) as exc:
        sys.stderr.write(f"rlaunch_trl_cpu: refused: {exc}\n")
        code = REFUSED_EXIT
    except BaseException:
        if not distributed:
            raise
        traceback.print_exc()
        code = 1
    if distributed:
        # Under torchrun, tearing down torch.distributed (gloo) at interpreter exit can deadlock;
        # everything this process wrote is complete, so leave without the teardown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
