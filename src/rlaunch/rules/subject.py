"""What every rule reads and returns: the `Subject` under judgement and its `Violation`s.

Field paths are written in the experiment side's vocabulary (`role_plan.*`, `topology.*`,
`config_yaml.*`, `runtime.*`, `execution.*`); the launch host translates them to document paths.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from rlaunch.runtimes.registry import RuntimeProfile

if TYPE_CHECKING:  # pragma: no cover
    from rlaunch.rules.model_shape import Architecture, Unsized

# The largest size a plan may state: above it a number is not a plan but a typo, and its
# arithmetic (and printing) would no longer be cheap.
MAX_SIZE = 2**62
# How many divisors a fix lists at most, and how far the search for them goes.
DIVISORS_LISTED = 16
DIVISOR_SEARCH = 4096


@dataclass(frozen=True)
class Violation:
    """One broken rule: a stable code, the offending field paths, the numbers and the fix."""

    code: str
    fields: tuple[str, ...]
    message: str
    fix: str
    values: Mapping[str, Any] = field(default_factory=dict)

    def line(self, fields: tuple[str, ...] | None = None) -> str:
        return f"[{self.code}] {self.message} (field: {', '.join(fields or self.fields)}). Fix: {self.fix}"


class ModelRecord(Protocol):
    """What the rules read of a model: the preflight's `ModelFacts` and the document's model input."""

    @property
    def num_attention_heads(self) -> int | None: ...
    @property
    def context_length(self) -> int | None: ...
    @property
    def revision(self) -> str | None: ...  # the source commit the model artifact recorded or pins
    @property
    def tokenizer_revision(self) -> str | None: ...  # what the spec pins it against


@dataclass(frozen=True)
class Subject:
    """What the rules judge, however it was written (an experiment's spec or a launch document).

    `plan`: role-plan field -> value; `recipe`: the recipe as written (sparse, role plan not
    rendered on the experiment side; the document's `skyrl` section at the host, which carries the
    role plan itself: `plan_in_recipe`); `seed` (named `seed_source` in messages), `source_digest`
    and the model's recorded facts (`model`) are checked when given; `architecture` turns on the
    memory rules.
    """

    num_nodes: int
    gpus_per_node: int
    gpu_variant: str
    plan: Mapping[str, Any]
    recipe: Mapping[str, Any]
    profile: RuntimeProfile
    entrypoint: Any
    seed: int | None = None
    source_digest: str | None = None
    model: ModelRecord | None = None
    architecture: Architecture | Unsized | None = None  # sizes the memory rules (None: not known)
    host_memory_bytes: int | None = None  # per node; a CPU slot's capacity is its share
    seed_source: str = "SkyRLSpec.seed"
    plan_in_recipe: bool = False
    data: tuple[Any, ...] = ()  # `rlaunch.rules.data_rules.DataFacts` of each data source, when recorded
    reward: str | None = None  # the shipped reward function (`module:function`) the trainer is to score with


def violation(code: str, fields: list[str], message: str, fix: str, **values: Any) -> Violation:
    return Violation(code, tuple(fields), message, fix, values)


def divisors(n: int) -> list[int]:
    """Divisors of `n`, ascending; O(min(sqrt n, DIVISOR_SEARCH)) work, never slow for any size.

    Only divisors up to DIVISOR_SEARCH and their cofactors are searched: for a larger `n` the
    middle of the list may be missing (`divisor_hint` says so).
    """
    if n <= 0:
        return []
    small, large = [], []
    d = 1
    while d <= DIVISOR_SEARCH and d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def divisor_hint(n: int, keep: Callable[[int], bool] | None = None) -> str:
    """The divisors of `n` for a fix (those `keep` accepts, when given: a fix offers only numbers that
    pass the other rules): at most DIVISORS_LISTED of them, saying what was left out."""
    found = [d for d in divisors(n) if keep is None or keep(d)]
    shown = ", ".join(map(_short, found))
    notes = []
    if len(found) > DIVISORS_LISTED:
        half = DIVISORS_LISTED // 2
        shown = ", ".join(map(_short, found[:half])) + ", ..., " + ", ".join(map(_short, found[-half:]))
        notes.append(f"{DIVISORS_LISTED} of {len(found)} shown")
    if (DIVISOR_SEARCH + 1) ** 2 <= n:
        notes.append(f"divisors between {DIVISOR_SEARCH} and {_short(n // DIVISOR_SEARCH)} not searched")
    return f"[{shown}]" + (f" ({'; '.join(notes)})" if notes else "")


def _short(n: int) -> str:
    return str(n) if n < 10**15 else f"~2**{n.bit_length() - 1}"
