"""`PlannedLaunch`: one launch document with what is derived from it, derived once.

A document is judged and shown through its runtime profile, its recipe composed on that profile's
base config, the geometry of that recipe and its per-GPU memory table. Planning builds the value
once per RL step from the document it would launch; the host builds it once from the document it
validated. The judgement (`rlaunch.judgement.judge`) reads it, so it composes nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rlaunch.launch_config.geometry import Geometry
from rlaunch.launch_config.schema import SkyRLLaunchConfig
from rlaunch.rules.document_subject import memory_table
from rlaunch.rules.memory import MemoryTable
from rlaunch.runtimes.registry import RuntimeProfile, get_profile


@dataclass(frozen=True)
class PlannedLaunch:
    document: SkyRLLaunchConfig
    profile: RuntimeProfile
    composed: Mapping[str, Any]  # the document's recipe on the profile's base config ({} when it does not compose)
    geometry: Geometry | None  # None: the recipe does not compose
    memory: MemoryTable

    @classmethod
    def of(cls, document: SkyRLLaunchConfig) -> PlannedLaunch:
        profile = get_profile(document.runtime.profile)
        composed, problems = profile.compose(document.skyrl)
        geometry = None if problems else Geometry.from_recipe(composed)
        return cls(document, profile, {} if problems else composed, geometry, memory_table(document))

    @property
    def gpus(self) -> int:
        """The GPUs the launch allocates (0 on a CPU runtime)."""
        alloc = self.document.cluster.allocation
        return alloc.num_nodes * alloc.gpus_per_node if self.profile.capabilities.accelerator != "cpu" else 0
