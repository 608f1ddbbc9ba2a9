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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FIXED = "fixed"
WORKED_AROUND = "worked around"
OPEN = "open"
UNVERIFIED = "unverified"


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
        """This defect's state for a lock given as {canonical package name: version} (PEP 440 order:
        a pre-release of `fixed_in` is not yet the fix)."""
        from packaging.version import Version

        version = pinned(locked, self.package)
        if version is not None and self.fixed_in is not None and Version(version) >= Version(self.fixed_in):
            return FIXED
        if self.workaround:
            return WORKED_AROUND
        return UNVERIFIED if version is None else OPEN


def pinned(locked: Mapping[str, str], package: str) -> str | None:
    """The locked version of `package` in {canonical name: version}; `canonicalize_name` (whose module
    loads packaging's platform tags) only for a name not written canonically, off a cold preflight's path."""
    if package in locked:
        return locked[package]
    from packaging.utils import canonicalize_name

    return locked.get(canonicalize_name(package))
