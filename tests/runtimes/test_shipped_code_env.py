"""The experiment's shipped code reaches a runtime's processes: on their PYTHONPATH after the adapter
(which it cannot shadow), whether the task names it (`extra`) or the step job's own environment does;
and the trl-cpu trainer's reward is the shipped function, registered under its `module:function`."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from rlaunch.experiment_code import CODE_PATH_ENV
from rlaunch.runtimes.environment import RuntimeEnvironment
from tests.support.adapters import import_adapter


def environment() -> RuntimeEnvironment:
    return RuntimeEnvironment(
        profile_name="p", digest="d", kind="host", python=sys.executable, adapter_dir="/adapter",
        base_config="/base.yaml", profile_file="/profile.yaml", launcher="python",
    )  # fmt: skip


def test_the_code_named_by_the_task_follows_the_adapter_and_precedes_an_extra_path() -> None:
    env = environment().process_env({CODE_PATH_ENV: "/task/shipped-code", "PYTHONPATH": "/extra"})
    assert env["PYTHONPATH"] == "/adapter:/task/shipped-code:/extra"


@pytest.mark.parametrize(("inherited", "path"), [("/job/code", "/adapter:/job/code"), ("", "/adapter")])
def test_the_code_of_the_step_job_reaches_the_runtime_tools_it_starts(
    monkeypatch: pytest.MonkeyPatch, inherited: str, path: str
) -> None:
    monkeypatch.setenv(CODE_PATH_ENV, inherited)
    assert environment().process_env({}, inherit=True)["PYTHONPATH"] == path
    assert environment().process_env({})["PYTHONPATH"] == "/adapter"  # an overlay inherits nothing


@pytest.fixture
def rewards(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201 - the adapter's rewards module
    module = import_adapter().rewards
    monkeypatch.setattr(module, "_REGISTRY", dict(module._REGISTRY))  # the registry is left as it was
    (tmp_path / "shipped_scores.py").write_text("def half(completion, truth):\n    return 0.5\nNOT_A_FUNCTION = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield module
    sys.modules.pop("shipped_scores", None)


def test_the_shipped_reward_is_registered_under_its_own_name(rewards) -> None:  # noqa: ANN001
    assert rewards.shipped("shipped_scores:half") == "shipped_scores:half"
    assert rewards.get("shipped_scores:half")("7", "7") == 0.5


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("shipped_scores:halve", "AttributeError"),
        ("shipped_scorez:half", "ModuleNotFoundError"),
        ("shipped_scores:NOT_A_FUNCTION", "is int, not a function"),
    ],
)
def test_a_shipped_reward_that_cannot_be_called_is_refused(rewards, path: str, why: str) -> None:  # noqa: ANN001
    with pytest.raises(rewards.UnknownRewardError, match=f"code.reward = {path!r}") as refused:
        rewards.shipped(path)
    assert why in str(refused.value) and path not in rewards.names()
