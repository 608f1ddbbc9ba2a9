"""The Iris tier driver: `tests/iris` (marker `iris`) against a real local Iris cluster.

Iris needs Python >= 3.12. Under an interpreter that has it, `tests/iris` runs directly and this
driver steps aside; otherwise the tier runs in a Python 3.12 venv built from `tests/iris/lock.txt`
(see tests/support/py312_tier.py), or this test says in one line why it cannot.
"""

from __future__ import annotations

import pytest

from tests.iris.iris_cluster import iris_importable
from tests.support.py312_tier import REPO, Tier, run_tier

IRIS = Tier(name="iris", lock=REPO / "tests" / "iris" / "lock.txt", tests=("tests/iris",))


@pytest.mark.iris
def test_iris_tier() -> None:
    if iris_importable():
        pytest.skip("this interpreter has Iris: tests/iris runs here directly")
    run_tier(IRIS)
