"""Fixtures for the RL configuration tests: every test gets its own storage prefix."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated(prefix: str) -> str:
    return prefix
