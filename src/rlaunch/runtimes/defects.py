"""Upstream defects a runtime's pinned environment may carry, kept as data in its profile.

A profile lists, under `known_defects`, the upstream defects that matter for launches: the
package and the first release that fixes it (`fixed_in`, absent while no fixed release is known),
the symptom, the preflight rule that refuses every plan that would trigger it (`workaround`) and
the name of the trigger the launcher evaluates on a plan's geometry (`trigger`; absent: every
plan on this runtime). Against the profile's lock each defect is:

* `fixed`         - the locked version of the package is at or past `fixed_in`;
* `worked around` - not fixed, but the preflight rule `workaround` refuses the triggering plans;
* `open`          - neither; a plan that triggers it is refused by the preflight (`defect.open`);
* `unverified`    - the lock does not pin the package, so nobody can tell.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

FIXED = "fixed"
WORKED_AROUND = "worked around"
OPEN = "open"
UNVERIFIED = "unverified"

_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)")


@dataclass(frozen=True)
class KnownDefect:
    id: str
    package: str
    symptom: str
    fixed_in: str | None = None
    workaround: str | None = None
    trigger: str | None = None

    @classmethod
    def from_yaml(cls, raw: Mapping[str, Any], where: str) -> KnownDefect:
        unknown = set(raw) - {"id", "package", "symptom", "fixed_in", "workaround", "trigger"}
        missing = {"id", "package", "symptom"} - set(raw)
        if unknown or missing:
            raise ValueError(
                f"{where}: known_defects entry {raw!r} has unknown keys {sorted(unknown)} / lacks {sorted(missing)}; "
                "each needs id, package, symptom and may give fixed_in, workaround, trigger"
            )
        values = {k: (None if raw.get(k) is None else str(raw[k])) for k in cls.__dataclass_fields__}
        return cls(**values)  # type: ignore[arg-type]

    def status(self, locked: Mapping[str, str]) -> str:
        """This defect's state for a lock given as {normalised package name: version}."""
        version = locked.get(normalise(self.package))
        if version is not None and self.fixed_in is not None and version_key(version) >= version_key(self.fixed_in):
            return FIXED
        if self.workaround:
            return WORKED_AROUND
        return UNVERIFIED if version is None else OPEN


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked_versions(requirements: Iterable[str]) -> dict[str, str]:
    """{package: version} of every exact pin (`name==version`, extras and markers ignored)."""
    out: dict[str, str] = {}
    for line in requirements:
        match = _PIN.match(line)
        if match:
            out[normalise(match.group(1))] = match.group(2)
    return out


def version_key(version: str) -> tuple[int, ...]:
    """A comparable key of a release's numeric part (`0.20.2.post1` -> (0, 20, 2))."""
    parts = []
    for piece in version.split("."):
        digits = re.match(r"\d+", piece)
        if not digits:
            break
        parts.append(int(digits.group()))
        if digits.group() != piece:
            break
    return tuple(parts)
