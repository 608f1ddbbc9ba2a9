"""`PreflightError`: a deterministic mistake found before anything is submitted.

Each violation carries a stable `code`, the offending field path(s), the values involved and the
fix; the rules that find them live once, in `rlaunch.rules`. Constructing a spec raises one `PreflightError` whose `violations` lists every problem.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rlaunch.errors import UserError

if TYPE_CHECKING:
    from rlaunch.rules import Violation


class PreflightError(UserError, ValueError):
    def __init__(
        self,
        code: str,
        fields: Sequence[str],
        message: str,
        fix: str,
        values: Mapping[str, Any] | None = None,
        violations: Sequence[PreflightError] = (),
    ) -> None:
        self.code = code
        self.fields = tuple(fields)
        self.values = dict(values or {})
        self.message = message
        self.fix = fix
        self.violations: tuple[PreflightError, ...] = tuple(violations) or (self,)
        super().__init__(self._render())

    @classmethod
    def from_violation(cls, v: Violation) -> PreflightError:
        return cls(v.code, v.fields, v.message, v.fix, v.values)

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle through their args; keep every field (e.g. across a process pool).
        nested = () if self.violations == (self,) else self.violations
        return (type(self), (self.code, self.fields, self.message, self.fix, self.values, nested))

    def _render(self) -> str:
        if len(self.violations) > 1 or self.violations[0] is not self:
            lines = [f"{len(self.violations)} preflight violation(s):"]
            lines.extend(f"  - {v.line()}" for v in self.violations)
            return "\n".join(lines)
        return self.line()

    def line(self) -> str:
        return f"[{self.code}] {self.message} (field: {', '.join(self.fields)}). Fix: {self.fix}"

    @property
    def codes(self) -> list[str]:
        return [v.code for v in self.violations]

    @classmethod
    def combine(cls, violations: Sequence[PreflightError]) -> PreflightError:
        flat = [leaf for v in violations for leaf in v.violations]
        if len(flat) == 1:
            return flat[0]
        fields = tuple(dict.fromkeys(f for v in flat for f in v.fields))
        return cls(
            "preflight.violations", fields, f"{len(flat)} violations", "fix each listed violation", violations=flat
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "fields": list(self.fields),
            "values": self.values,
            "message": self.message,
            "fix": self.fix,
        }
