"""Which of a runtime's known upstream defects a plan would trigger, and what that means.

The profile says what is known (`rlaunch.runtimes.defects`); this module owns the triggers: pure
predicates over the plan's one geometry and composed recipe, named in the profile's data. An
`open` defect that the plan triggers is a preflight violation (`defect.open`); a worked-around one
is refused by its own rule; a fixed one needs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch.launch_config.composition import get_path
from rlaunch.launch_config.geometry import Geometry
from rlaunch.launch_config.recipe_keys import GENERATOR
from rlaunch.rules.subject import Violation, violation
from rlaunch.runtimes.defects import OPEN, KnownDefect, pinned
from rlaunch.runtimes.registry import RuntimeProfile

CODES = ("defect.open",)

Trigger = Callable[[Geometry, Mapping[str, Any]], bool]


def _tail_stride(geo: Geometry, composed: Mapping[str, Any]) -> bool:
    stride = geo.tail_stride()
    return stride is not None and geo.train_batch % stride != 0


def _step_wise(geo: Geometry, composed: Mapping[str, Any]) -> bool:
    return bool(get_path(composed, GENERATOR.STEP_WISE_TRAJECTORIES, False))


TRIGGERS: Mapping[str, Trigger] = {"tail_stride": _tail_stride, "step_wise_trajectories": _step_wise}


@dataclass(frozen=True)
class DefectFinding:
    defect: KnownDefect
    status: str
    triggered: bool

    def line(self) -> str:
        fix = f", fixed in {self.defect.package} {self.defect.fixed_in}" if self.defect.fixed_in else ""
        by = f" by rule {self.defect.workaround}" if self.defect.workaround else ""
        hit = "this plan triggers it" if self.triggered else "not triggered by this plan"
        return (
            f"{self.defect.id} ({self.defect.package}{fix}): {self.status}{by if self.status != 'fixed' else ''}; {hit}"
        )


def findings(
    profile: RuntimeProfile, composed: Mapping[str, Any], geometry: Geometry | None = None
) -> list[DefectFinding]:
    """Each known defect of `profile` with its status for the pinned lock and whether this plan
    triggers it; `geometry` is the composed recipe's (derived here when not given)."""
    locked = profile.locked_versions()
    geo = geometry or Geometry.from_recipe(composed)
    out = []
    for defect in profile.known_defects:
        trigger = TRIGGERS.get(defect.trigger) if defect.trigger else None
        if defect.trigger and trigger is None:
            raise ValueError(
                f"runtime {profile.name!r}: known defect {defect.id} names trigger {defect.trigger!r}, "
                f"which rlaunch does not know; use one of {sorted(TRIGGERS)} or none"
            )
        triggered = True if trigger is None else trigger(geo, composed)
        out.append(DefectFinding(defect, defect.status(locked), triggered))
    return out


def defect_rules(profile: RuntimeProfile, composed: Mapping[str, Any], geometry: Geometry) -> list[Violation]:
    """`defect.open` for every open defect of the pinned lock that this plan would trigger."""
    locked = profile.locked_versions()
    out = []
    for f in findings(profile, composed, geometry):
        if f.status != OPEN or not f.triggered:
            continue
        version = pinned(locked, f.defect.package)  # an open defect's package is pinned (else: unverified)
        repin = (
            f"repin the runtime to {f.defect.package}>={f.defect.fixed_in}, which has the fix"
            if f.defect.fixed_in
            else "repin the runtime once a release with the fix exists"
        )
        out.append(
            violation(
                "defect.open",
                [f"runtime.known_defects.{f.defect.id}"],
                f"runtime {profile.name!r} pins {f.defect.package} {version}, which has the open upstream defect "
                f"{f.defect.id}, and this plan triggers it: {f.defect.symptom}",
                f"change the plan so it does not trigger the defect, or {repin} "
                "(a new runtime digest wants a new artifact version)",
                defect=f.defect.id,
                package=f.defect.package,
                pinned=version,
            )
        )
    return out
