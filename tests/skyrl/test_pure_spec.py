"""Building a spec, an RL step and the whole 64-GPU example graph reads nothing: no storage, no
storage setting from the environment. Checking belongs to planning, which reads storage once.

While the graph is built, RLAUNCH_PREFIX points at a location nothing can be read from, every
storage access and every `open` raises, and reading where storage is (`STORAGE_SETTINGS`) raises
too. Runtime profiles are package data, loaded (and their source digests computed) before.
"""

from __future__ import annotations

import builtins
import io
import os
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import pytest

from experiments import rl_plan_example
from rlaunch import storage
from rlaunch.artifacts.versions import BuildContext, VersionCodex, build_context
from rlaunch.runtimes.registry import get_profile
from rlaunch.skyrl import PreflightError, SkyRLSpec
from rlaunch.skyrl.plan.planning import plan
from rlaunch.skyrl.plan.rl_step import SkyRLArtifactStep
from tests.support.specs import DAY, model_step, recipe, seed_topology, spec, to_yaml


class Refused(AssertionError):
    """Building touched what only planning may touch."""


STORAGE_SETTINGS = (storage.PREFIX_ENV, "RLAUNCH_TEMP_PREFIX", "RLAUNCH_REGION")


class GuardedEnviron(MutableMapping[str, str]):
    """os.environ, except that reading where storage is raises."""

    def __init__(self, real: MutableMapping[str, str]) -> None:
        self.real = real

    def __getitem__(self, key: str) -> str:
        if key in STORAGE_SETTINGS:
            raise Refused(f"read ${key} while building")
        return self.real[key]

    def __setitem__(self, key: str, value: str) -> None:
        self.real[key] = value

    def __delitem__(self, key: str) -> None:
        del self.real[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.real)

    def __len__(self) -> int:
        return len(self.real)


@contextmanager
def nothing_readable(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[None]:
    for profile in ("fsdp", "megatron", "trl-cpu"):
        _ = get_profile(profile).source_digest  # package data, not storage
    unreadable = tmp_path / "unreadable"
    unreadable.mkdir(mode=0)
    monkeypatch.setenv(storage.PREFIX_ENV, str(unreadable / "prefix"))

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise Refused(f"file access while building: {args[:1]}")

    with monkeypatch.context() as guard:
        guard.setattr(storage, "_route", refuse)
        guard.setattr(storage, "filesystem", refuse)
        guard.setattr(builtins, "open", refuse)
        guard.setattr(io, "open", refuse)
        guard.setattr(os, "listdir", refuse)
        guard.setattr(os, "scandir", refuse)
        guard.setattr(os, "environ", GuardedEnviron(os.environ))
        yield


def test_the_example_graph_builds_without_reading_anything(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    with nothing_readable(monkeypatch, tmp_path), build_context(BuildContext(VersionCodex(default=DAY))):
        rl = rl_plan_example.rl_step(broken=False)
        evaluation = rl_plan_example.evaluation(rl)
        broken = rl_plan_example.rl_step(broken=True)  # its violations are the planner's to find
        plain = spec(model=model_step(), topo=seed_topology())
    assert isinstance(rl, SkyRLArtifactStep) and [d.identity for d in evaluation.deps] == [
        rl.identity,
        f"data/gsm8k@{DAY}",
    ]
    assert isinstance(plain, SkyRLSpec) and isinstance(broken, SkyRLArtifactStep)


def test_a_broken_spec_builds_and_its_violations_surface_when_the_graph_is_planned(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, prefix: str
) -> None:
    with nothing_readable(monkeypatch, tmp_path), build_context(BuildContext(VersionCodex(default=DAY))):
        broken = rl_plan_example.rl_step(broken=True)
    with pytest.raises(PreflightError) as info:
        plan([broken], prefix)
    assert [v.code for v in info.value.violations] == [
        "topology.gpu_budget",
        "batch.train_mini",
        "batch.per_gpu_mini_micro",
        "batch.per_gpu_train_mini",
        "batch.tail_stride",
    ]


def test_a_spec_still_refuses_its_own_bad_fields_when_built() -> None:
    with pytest.raises(PreflightError, match="config_yaml"):
        spec(config_yaml="- not\n- a mapping\n")
    with pytest.raises(ValueError, match="train_data"):
        spec(train_data=())
    assert spec(config_yaml=to_yaml(recipe())).seed == 17
