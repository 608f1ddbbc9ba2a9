"""The trl-cpu adapter's pure-Python modules, imported in this interpreter by the tests that hold
an adapter's copy of rlaunch's logic against the original (runtimes, intervals, evaluation)."""

from __future__ import annotations

import sys
from pathlib import Path

ADAPTER_DIR = Path(__file__).resolve().parents[2] / "src" / "rlaunch" / "runtimes" / "adapters" / "trl_cpu"


def import_adapter():
    """The adapter's pure-Python modules, importable here for unit tests (no torch needed)."""
    if str(ADAPTER_DIR) not in sys.path:
        sys.path.insert(0, str(ADAPTER_DIR))
    import rlaunch_trl_cpu.checkpoints
    import rlaunch_trl_cpu.recipe
    import rlaunch_trl_cpu.rewards
    import rlaunch_trl_cpu.storage

    return rlaunch_trl_cpu
