"""The SkyRL 0.4.0 contract tier: `tests/contract/skyrl/`, run in a Python 3.12 venv built from
`tests/contract/skyrl/lock.txt` (skyrl==0.4.0 and the CPU-installable part of its training stack)."""

from __future__ import annotations

from tests.support.py312_tier import REPO, Tier

SKYRL_TIER = Tier(
    name="skyrl", lock=REPO / "tests" / "contract" / "skyrl" / "lock.txt", tests=("tests/contract/skyrl",)
)
