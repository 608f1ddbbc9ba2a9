"""The architecture facts equal what transformers builds, exactly, for a small config of every
family and each knob that changes a count (the numbers: tests/support/built_counts.py, rebuilt with
transformers by tests/runtimes/test_architecture_counts.py). The published totals of
test_memory_model.py hold full-size checkpoints to 2 %; these hold every term to the parameter."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from rlaunch.rules import memory
from rlaunch.rules.model_shape import FAMILIES, Architecture, from_hf_config
from tests.support.built_counts import BUILT, Built


def _arch(built: Built) -> Architecture:
    arch = from_hf_config(built.config)
    assert isinstance(arch, Architecture), arch
    return arch


@pytest.mark.parametrize("built", BUILT, ids=[f"{i}-{b.id}" for i, b in enumerate(BUILT)])
def test_parameters_equal_what_transformers_builds(built: Built) -> None:
    arch = _arch(built)
    assert arch.params.total == built.total
    if built.by_component:
        assert {k: v for k, v in asdict(arch.params).items() if v} == built.by_component


@pytest.mark.parametrize("built", BUILT, ids=[f"{i}-{b.id}" for i, b in enumerate(BUILT)])
def test_kv_width_and_sliding_layers_equal_what_transformers_builds(built: Built) -> None:
    arch = _arch(built)
    if built.kv_width:  # MLA caches a latent instead (its width: test_memory_model.py)
        assert memory.kv_bytes_per_token(arch, dtype_bytes=1) == built.kv_width
        assert memory.kv_bytes_per_token(arch, dtype_bytes=2) == 2 * built.kv_width
    if built.sliding_layers is not None:
        assert arch.sliding_window == built.config["sliding_window"]
        assert arch.sliding_layers == built.sliding_layers


def test_every_family_is_built() -> None:
    assert {b.config["model_type"] for b in BUILT} == set(FAMILIES) - {"kimi_k2"}  # Kimi-K2: DeepSeek-V3's code
