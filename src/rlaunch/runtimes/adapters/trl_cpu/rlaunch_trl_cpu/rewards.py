"""Verifiable rewards, registered by name (the recipe's `environment.env_class`, or a row's `env_class`).

A reward is a plain function `(completion: str, ground_truth: str) -> float`. Register one with
`@register("name")`. Pure Python: the same functions score training completions (wrapped for TRL
in `trainer`) and evaluation generations (`evaluate`). The experiment's own reward (the launch
document's `code.reward`, `module:function` of the code shipped on PYTHONPATH) is registered under
that name by `shipped`, and scores every row in place of its env class.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable

RewardFn = Callable[[str, str], float]

_REGISTRY: dict[str, RewardFn] = {}

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class UnknownRewardError(ValueError):
    pass


def register(name: str) -> Callable[[RewardFn], RewardFn]:
    def decorate(fn: RewardFn) -> RewardFn:
        _REGISTRY[name] = fn
        return fn

    return decorate


def names() -> list[str]:
    return sorted(_REGISTRY)


def get(name: str) -> RewardFn:
    if name not in _REGISTRY:
        raise UnknownRewardError(
            f"environment.env_class = {name!r} has no reward registered in the trl-cpu runtime; registered: {names()}"
        )
    return _REGISTRY[name]


def shipped(path: str) -> str:
    """Import the experiment's reward `module:function` and register it under `path`; returns `path`."""
    module, _, name = path.partition(":")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise UnknownRewardError(
            f"code.reward = {path!r} cannot be imported from the shipped code ({type(exc).__name__}: {exc}); "
            "ship its module with SkyRLSpec(code=ExperimentCode(modules=(...)))"
        ) from exc
    if not callable(fn):
        raise UnknownRewardError(
            f"code.reward = {path!r} is {type(fn).__name__}, not a function (completion, ground_truth) -> float"
        )
    _REGISTRY[path] = fn
    return path


def _same_number(text: str, truth: str) -> bool:
    try:
        return float(text) == float(truth)
    except ValueError:
        return text.strip() == truth.strip()


def _digit_share(completion: str) -> float:
    visible = [c for c in completion if not c.isspace()]
    if not visible:
        return 0.0
    return sum(c.isdigit() for c in visible) / len(visible)


@register("arithmetic")
def arithmetic(completion: str, ground_truth: str) -> float:
    """1.0 when the completion's answer (its last number) equals the ground truth.

    Otherwise a small shaping term, 0.2 x the share of digits among the completion's visible
    characters, so that a tiny random model still gets a reward that varies within a group
    (a zero-variance group carries no GRPO signal).
    """
    numbers = _NUMBER.findall(completion)
    if numbers and _same_number(numbers[-1], str(ground_truth)):
        return 1.0
    return 0.2 * _digit_share(completion)


@register("gsm8k")
def gsm8k(completion: str, ground_truth: str) -> float:
    """1.0 when the answer equals the ground truth: the number after `####` if present, else the
    last number in the completion (the flexible rule); 0.0 otherwise."""
    marked = re.search(r"####\s*(-?[\d,]+(?:\.\d+)?)", completion)
    if marked:
        answer = marked.group(1).replace(",", "")
    else:
        numbers = _NUMBER.findall(completion.replace(",", ""))
        if not numbers:
            return 0.0
        answer = numbers[-1]
    return 1.0 if _same_number(answer, str(ground_truth).replace(",", "")) else 0.0
