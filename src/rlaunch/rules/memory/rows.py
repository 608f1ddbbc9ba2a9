"""What every part of the memory model shares: a table's row, GiB as it is printed, and the
composed recipe's keys as the model reads them (with SkyRL's defaults already composed in)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch.dotted import get_path
from rlaunch.launch_config.recipe_keys import ENGINE, GENERATOR, SAMPLING, TRAINER
from rlaunch.rules.devices import GIB

TIGHT_MARGIN = 0.10  # an estimate above 90 % of capacity is tight


@dataclass(frozen=True)
class Row:
    """One role x phase on one device: bytes estimated, capacity, the certain part, how it is made."""

    role: str
    phase: str
    estimate: int
    capacity: int
    certain: int = 0
    detail: str = ""
    margin: float = TIGHT_MARGIN  # 0 for a row that is a budget by design (vLLM claims its share)
    parts: tuple[tuple[str, int], ...] = ()  # the estimate by term (states, activations, logits, ...)

    def part(self, name: str) -> int:
        """One term of the estimate (0 when the row has no such term)."""
        return sum(n for term, n in self.parts if term == name)

    @property
    def headroom(self) -> int:
        return self.capacity - self.estimate

    @property
    def status(self) -> str:
        if self.certain > self.capacity:
            return "REFUSED"
        if self.estimate > self.capacity:
            return "over (estimate)"
        return "tight" if self.estimate > self.capacity * (1 - self.margin) else "ok"

    def as_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "phase": self.phase,
            "estimate_gib": gib(self.estimate),
            "capacity_gib": gib(self.capacity),
            "headroom_gib": gib(self.headroom),
            "certain_gib": gib(self.certain),
            "status": self.status,
            "detail": self.detail,
        }


def gib(n: int) -> float:
    return round(n / GIB, 2)


@dataclass(frozen=True)
class Keys:
    """The composed recipe's keys the model reads, with SkyRL's own defaults already composed in."""

    recipe: Mapping[str, Any]

    def __call__(self, key: str, default: Any = None) -> Any:
        value = get_path(self.recipe, key, None)
        return default if value is None else value


def max_model_len(composed: Mapping[str, Any]) -> int:
    """vLLM's `max_model_len`: an explicit engine setting, else SkyRL's input + generation budget."""
    k = Keys(composed)
    explicit = k(ENGINE.MAX_MODEL_LEN)
    if isinstance(explicit, int) and explicit > 0:
        return explicit
    prompt = int(k(GENERATOR.MAX_INPUT_LENGTH, k(TRAINER.MAX_PROMPT_LENGTH, 0)))
    return prompt + int(k(SAMPLING.MAX_GENERATE_LENGTH, 0))
