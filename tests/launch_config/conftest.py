"""Fixtures for the launch-document tests: an isolated storage prefix per test."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated(prefix: str) -> str:
    return prefix
