"""A Hugging Face hub cache on disk, used offline: the model and dataset source tests share it."""

from __future__ import annotations

from pathlib import Path

import pytest


def use_offline_hub_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point huggingface_hub at `cache`, offline, whether or not an earlier test imported it."""
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # huggingface_hub reads both once, at import: point an already imported one at this cache too.
    constants = pytest.importorskip("huggingface_hub.constants")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
