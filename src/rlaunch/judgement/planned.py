"""`PlannedLaunch`: one launch document with what is derived from it, derived once.

A document is judged and shown through its runtime profile, its recipe composed on that profile's
base config, the geometry of that recipe and its per-GPU memory table. Planning builds the value
once per RL step from the document it would launch; the host builds it once from the document it
validated. The judgement (`rlaunch.judgement.judge`) reads it, so it composes nothing itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlaunch.launch_config.composition import RecipeProblem
from rlaunch.launch_config.geometry import Geometry
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.rules.document_subject import composed_memory_table
from rlaunch.rules.memory import MemoryTable
from rlaunch.runtimes.registry import RuntimeProfile, get_profile


@dataclass(frozen=True)
class PlannedLaunch:
    document: SkyRLLaunchConfig
    profile: RuntimeProfile
    composed: dict[str, Any]  # the document's recipe on the profile's base config (as far as it composes)
    problems: tuple[RecipeProblem, ...]  # why the recipe does not compose (empty: it does)
    geometry: Geometry | None  # None: the recipe does not compose
    memory: MemoryTable

    @classmethod
    def of(cls, document: SkyRLLaunchConfig) -> PlannedLaunch:
        profile = get_profile(document.runtime.profile)
        composed, problems = profile.compose(document.skyrl)
        if problems:
            unsized = MemoryTable(None, unsized=("the recipe does not compose",))
            return cls(document, profile, composed, tuple(problems), None, unsized)
        geometry = Geometry.from_recipe(composed)
        memory = composed_memory_table(document, profile, composed, geometry)
        return cls(document, profile, composed, (), geometry, memory)

    @property
    def gpus(self) -> int:
        """The GPUs the launch allocates (0 on a CPU runtime)."""
        alloc = self.document.cluster.allocation
        return alloc.num_nodes * alloc.gpus_per_node if self.profile.capabilities.accelerator != "cpu" else 0
