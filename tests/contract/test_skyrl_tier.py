"""Runs the SkyRL 0.4.0 contract tier (tests/contract/skyrl) in its Python 3.12 venv; skipped, with
one line saying why, where Python 3.12 is absent. `pytest -m "not skyrl"` leaves it out."""

from __future__ import annotations

import pytest

from tests.contract.skyrl_tier import SKYRL_TIER
from tests.support.py312_tier import run_tier


@pytest.mark.skyrl
def test_skyrl_contract_tier() -> None:
    result = run_tier(SKYRL_TIER)
    assert " passed" in result.summary and "failed" not in result.summary, result.summary
