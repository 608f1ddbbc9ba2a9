"""The accuracy interval clustered by prompt (rlaunch.intervals) and the adapters' copies of it."""

from __future__ import annotations

import math
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlaunch.intervals import Accuracy, clustered_accuracy, difference, pairable, wilson
from rlaunch.runtimes.registry import get_profile
from tests.support.adapters import import_adapter

sys.path.insert(0, str(get_profile("fsdp").adapter_dir))
from rlaunch_skyrl import evaluate as skyrl_evaluate  # noqa: E402

trl_evaluate = __import__(import_adapter().__name__ + ".evaluate", fromlist=["clustered_accuracy"])

successes = st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=8)
prompts = st.lists(successes, min_size=1, max_size=40)


def ordinary_wilson(right: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The textbook binomial score interval, written out independently of the module."""
    p = right / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=300))
def test_one_completion_per_prompt_is_the_ordinary_binomial_interval(flat: list[float]) -> None:
    found = clustered_accuracy([[s] for s in flat])
    n, right = len(flat), int(sum(flat))
    assert found.accuracy == right / n and found.n == found.n_prompts == n
    assert found.stderr == pytest.approx(math.sqrt(right / n * (1 - right / n) / n), abs=1e-12)
    assert (found.low, found.high) == pytest.approx(ordinary_wilson(right, n), abs=1e-9)


@given(st.lists(st.sampled_from([0.0, 1.0]), min_size=1, max_size=100), st.integers(min_value=2, max_value=8))
def test_identical_samples_within_a_prompt_count_as_one_and_widen_the_interval(flat: list[float], k: int) -> None:
    copied = clustered_accuracy([[s] * k for s in flat])
    independent = clustered_accuracy([[s] for s in flat * k])  # the same n completions, each its own prompt
    assert copied.accuracy == pytest.approx(independent.accuracy)
    one_each = clustered_accuracy([[s] for s in flat])
    assert (copied.low, copied.high) == pytest.approx((one_each.low, one_each.high), abs=1e-9)
    assert copied.stderr == pytest.approx(independent.stderr * math.sqrt(k), abs=1e-12)
    assert copied.high - copied.low > independent.high - independent.low


def test_identical_samples_widen_the_interval_at_the_learning_examples_size() -> None:
    """200 prompts x 8 samples at 0.4: the clustered interval is the 200 prompts', not 1600 completions'."""
    copied = clustered_accuracy([[1.0] * 8] * 80 + [[0.0] * 8] * 120)
    assert (copied.n, copied.n_prompts, copied.samples_per_prompt) == (1600, 200, 8)
    assert (copied.low, copied.high) == pytest.approx(ordinary_wilson(80, 200), abs=1e-9)
    assert copied.high - copied.low > 2 * (ordinary_wilson(640, 1600)[1] - ordinary_wilson(640, 1600)[0])


@given(prompts)
def test_bounds_lie_in_0_1_around_the_accuracy(scores: list[list[float]]) -> None:
    found = clustered_accuracy(scores)
    assert 0.0 <= found.low <= found.accuracy <= found.high <= 1.0
    assert found.high > found.low  # never a zero-width interval, even at 0 or 1


def test_all_wrong_takes_the_prompts_as_the_units() -> None:
    """At 0 the SE is 0 and says nothing of the design: the interval is the prompts' Wilson interval."""
    found = clustered_accuracy([[0.0] * 8] * 16)
    assert found.accuracy == 0.0 and found.stderr == 0.0
    assert (found.low, found.high) == pytest.approx(wilson(0.0, 16))


def test_no_completions_is_the_whole_unit_interval() -> None:
    assert clustered_accuracy([]) == Accuracy(accuracy=0.0, low=0.0, high=1.0, stderr=0.0, n=0, n_prompts=0)
    assert clustered_accuracy([[], []]).n_prompts == 0


def test_uneven_prompts_have_no_samples_per_prompt() -> None:
    assert clustered_accuracy([[1.0, 0.0], [1.0]]).samples_per_prompt is None
    assert clustered_accuracy([[1.0, 0.0], [1.0, 1.0]]).samples_per_prompt == 2


@given(prompts)
def test_both_adapters_copy_the_interval_exactly(scores: list[list[float]]) -> None:
    """The adapters cannot import rlaunch: their copies write the keys `Accuracy.to_json` names, the same values."""
    expected = clustered_accuracy(scores).to_json()
    assert trl_evaluate.clustered_accuracy(scores) == expected
    assert skyrl_evaluate.clustered_accuracy(scores) == expected


def test_an_empty_evaluation_is_the_same_in_every_copy() -> None:
    expected = clustered_accuracy([]).to_json()
    assert trl_evaluate.clustered_accuracy([]) == expected == skyrl_evaluate.clustered_accuracy([])


def test_the_unpaired_difference_adds_the_variances() -> None:
    a = clustered_accuracy([[1.0] * 8] * 80 + [[0.0] * 8] * 120)
    b = clustered_accuracy([[1.0] * 8] * 100 + [[0.0] * 8] * 100)
    found = difference(a, b, paired=False)
    assert found.difference == pytest.approx(0.1)
    half = 1.959963984540054 * math.hypot(a.stderr, b.stderr)
    assert (found.low, found.high) == pytest.approx((0.1 - half, 0.1 + half))
    assert found.exceeds_noise and found.verdict().endswith(": exceeds the interval")


def test_pairing_by_prompt_removes_the_prompts_shared_difficulty() -> None:
    """B solves every prompt A solves and 10 more: unpaired that is noise, paired it is not."""
    a = clustered_accuracy([[1.0] * 4] * 90 + [[0.0] * 4] * 110)
    b = clustered_accuracy([[1.0] * 4] * 100 + [[0.0] * 4] * 100)
    unpaired, paired = difference(a, b, paired=False), difference(a, b, paired=True)
    assert unpaired.difference == pytest.approx(paired.difference) == pytest.approx(0.05)
    assert not unpaired.exceeds_noise and paired.exceeds_noise
    assert unpaired.verdict() == f"B - A = +0.050 [{unpaired.low:+.3f}, {unpaired.high:+.3f}]: within noise"


def test_an_interval_touching_zero_is_within_noise() -> None:
    same = clustered_accuracy([[1.0], [0.0]])
    assert not difference(same, same, paired=True).exceeds_noise  # [0, 0]


def test_pairing_needs_the_same_prompts_and_samples() -> None:
    a = clustered_accuracy([[1.0, 0.0]] * 3)
    assert pairable(a, a)
    assert not pairable(a, clustered_accuracy([[1.0]] * 3))  # other samples per prompt
    assert not pairable(a, clustered_accuracy([[1.0, 0.0]] * 4))  # other prompts
    with pytest.raises(ValueError, match="A has 3 prompts x 2, B 3 x 1"):
        difference(a, clustered_accuracy([[1.0]] * 3), paired=True)
