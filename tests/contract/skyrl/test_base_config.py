"""The committed base config is what the installed SkyRL dumps, and composition accepts exactly
SkyRL's keys."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rlaunch.runtimes.registry import get_profile

pytestmark = pytest.mark.skyrl


def test_committed_base_config_equals_the_installed_package_dump() -> None:
    from rlaunch_skyrl.base_config import dump

    committed = Path(get_profile("fsdp").base_config_file).read_text(encoding="utf-8")
    assert committed == dump(), "regenerate it: python -m scripts.skyrl_regen base-config"


def test_every_skyrl_leaf_is_a_key_of_the_base_config() -> None:
    from skyrl.train.config import SkyRLTrainConfig

    from rlaunch.launch_config.composition import leaves

    profile = get_profile("fsdp")
    stops = profile.base_shape.stops
    ours = {path for path, _ in leaves(profile.base_config(), stop=stops)}
    theirs = {path for path, _ in leaves(dataclasses.asdict(SkyRLTrainConfig()), stop=stops)}
    assert ours == theirs and len(ours) > 350  # 416 leaves in asdict(); free-form mappings count once here


def test_keys_skyrl_has_compose_and_unknown_ones_are_refused() -> None:
    profile = get_profile("fsdp")
    recipe = {
        "generator": {"inference_engine": {"engine_init_kwargs": {"max_model_len": 4096}}},
        "trainer": {"policy": {"fsdp_config": {"cpu_offload": True}, "model": {"lora": {"rank": 8}}}},
    }
    composed, problems = profile.compose(recipe)
    assert problems == []
    assert composed["generator"]["inference_engine"]["engine_init_kwargs"] == {"max_model_len": 4096}
    _, problems = profile.compose({"generator": {"async_engine": True}})
    assert [p.path for p in problems] == ["generator.async_engine"]
