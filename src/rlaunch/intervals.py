"""An evaluation's accuracy with a 95% interval clustered by prompt, and the difference of two.

Completions that share a prompt are not independent: a prompt the model always solves adds eight
right answers at eight samples per prompt, not eight independent draws. The cluster-robust
standard error of a mean (Miller, "Adding Error Bars to Evals: A Statistical Approach to Language
Model Evaluations", 2024, arXiv:2411.00640, "clustered standard errors"; Cameron & Miller 2015)
counts them as one cluster:

    p    = (sum over all completions of s) / n                  n completions, C prompts
    SE^2 = sum over prompts c of (S_c - k_c * p)^2 / n^2        S_c: prompt c's sum, k_c: its completions

With one completion per prompt this is the ordinary binomial variance p(1-p)/n; with k identical
completions per prompt it is p(1-p)/C, k times larger. The interval is Wilson's score interval (sound
at 0 and 1, always inside [0, 1]) at the effective sample size n_eff = p(1-p) / SE^2 (Kish's design
effect), which is n exactly when each prompt has one completion. n_eff is held between C and n: at
p = 0 or 1 the SE is 0 and says nothing of the design, so the interval takes the prompts as the
units (the widest the clustering can make it); a design more even than chance is never credited
with more than n independent samples.

The difference B - A of two evaluations: unpaired, SE = sqrt(SE_A^2 + SE_B^2); paired by prompt
(both scored the same prompts, in the same order, with the same completions per prompt), the
clustered SE of the per-prompt differences d_c = mean_B(c) - mean_A(c), SE^2 = sum (d_c - d)^2 / C^2,
which removes the prompts' shared difficulty from the noise (Miller, "paired differences"). The
difference's interval is normal, d +- z SE; it exceeds the noise when it excludes 0.

`rlaunch_trl_cpu.evaluate` and `rlaunch_skyrl.evaluate` carry copies (ARCHITECTURE.md, "Copies the
adapter boundary forces"); tests/ground_floor/test_intervals.py holds the three together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Z95 = 1.959963984540054  # the standard normal's 97.5th percentile


@dataclass(frozen=True)
class Accuracy:
    """The share of successful completions with its clustered standard error and 95% interval.

    `per_prompt` holds each prompt's mean, in the order the prompts were scored (a paired
    comparison matches prompts by position)."""

    accuracy: float
    low: float
    high: float
    stderr: float
    n: int  # completions
    n_prompts: int
    per_prompt: tuple[float, ...] = ()

    @property
    def samples_per_prompt(self) -> int | None:
        """Completions per prompt when every prompt has as many; None otherwise."""
        if not self.n_prompts or self.n % self.n_prompts:
            return None
        return self.n // self.n_prompts

    def to_json(self) -> dict[str, Any]:
        """The fields an evaluation's report.json carries (the adapters write the same keys)."""
        return {
            "accuracy": self.accuracy,
            "accuracy_interval": [self.low, self.high],
            "stderr": self.stderr,
            "n": self.n,
            "n_prompts": self.n_prompts,
            "samples": self.samples_per_prompt,
            "per_prompt": list(self.per_prompt),
        }


def clustered_accuracy(scores: Sequence[Sequence[float]], z: float = Z95) -> Accuracy:
    """Accuracy over `scores` (one sequence of 0/1 successes per prompt) with its interval clustered by prompt."""
    n = sum(len(prompt) for prompt in scores)
    prompts = [prompt for prompt in scores if prompt]
    if n == 0:
        return Accuracy(accuracy=0.0, low=0.0, high=1.0, stderr=0.0, n=0, n_prompts=0)
    p = sum(sum(prompt) for prompt in prompts) / n
    stderr = math.sqrt(sum((sum(prompt) - len(prompt) * p) ** 2 for prompt in prompts)) / n
    n_eff = min(float(n), max(float(len(prompts)), p * (1 - p) / stderr**2 if stderr > 0 else 0.0))
    low, high = wilson(p, n_eff, z)
    return Accuracy(
        accuracy=p,
        low=low,
        high=high,
        stderr=stderr,
        n=n,
        n_prompts=len(prompts),
        per_prompt=tuple(sum(prompt) / len(prompt) for prompt in prompts),
    )


def wilson(p: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval of a proportion `p` over `n` (possibly effective, fractional) samples."""
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # Wilson's interval holds p; in floating point its ends may miss it by an ulp (p = 0 gives 5.6e-17).
    return (max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half)))


@dataclass(frozen=True)
class Difference:
    """B - A with its 95% interval; `paired` when it was computed prompt by prompt."""

    difference: float
    low: float
    high: float
    paired: bool

    @property
    def exceeds_noise(self) -> bool:
        """The interval excludes 0: B and A differ by more than the evaluations' noise."""
        return self.low > 0 or self.high < 0

    def verdict(self) -> str:
        """`B - A = +0.031 [-0.010, 0.072]: within noise` (or `exceeds the interval`)."""
        said = "exceeds the interval" if self.exceeds_noise else "within noise"
        return f"B - A = {self.difference:+.3f} [{self.low:+.3f}, {self.high:+.3f}]: {said}"


def pairable(a: Accuracy, b: Accuracy) -> bool:
    """Both scored the same number of prompts with the same completions per prompt (the callers
    check that the data was the same)."""
    return (
        a.n_prompts > 0
        and a.n_prompts == b.n_prompts == len(a.per_prompt) == len(b.per_prompt)
        and a.samples_per_prompt is not None
        and a.samples_per_prompt == b.samples_per_prompt
    )


def difference(a: Accuracy, b: Accuracy, *, paired: bool, z: float = Z95) -> Difference:
    """B - A: paired by prompt when `paired` (refused unless `pairable`), else unpaired."""
    if not paired:
        d = b.accuracy - a.accuracy
        stderr = math.hypot(a.stderr, b.stderr)
        return Difference(difference=d, low=d - z * stderr, high=d + z * stderr, paired=False)
    if not pairable(a, b):
        raise ValueError(
            f"paired=True needs the same prompts with the same completions per prompt; A has {a.n_prompts} "
            f"prompts x {a.samples_per_prompt}, B {b.n_prompts} x {b.samples_per_prompt}: compare them unpaired"
        )
    deltas = [y - x for x, y in zip(a.per_prompt, b.per_prompt, strict=True)]
    d = sum(deltas) / len(deltas)
    stderr = math.sqrt(sum((delta - d) ** 2 for delta in deltas)) / len(deltas)
    return Difference(difference=d, low=d - z * stderr, high=d + z * stderr, paired=True)
