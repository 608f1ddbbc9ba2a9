"""`SkyRLRuntime`: which pinned trainer environment runs the recipe, and its source digest."""

from __future__ import annotations

from dataclasses import dataclass

from rlaunch.runtimes.registry import RuntimeProfile, get_profile


@dataclass(frozen=True)
class SkyRLRuntime:
    """A runtime profile (`trl-cpu`, `fsdp`, `megatron`, or a registered plugin).

    `source_digest` hashes exactly what will run (the lock plus the adapter source rlaunch ships),
    is part of identity, is printed in the plan and is written into every checkpoint.
    """

    profile: str

    def __post_init__(self) -> None:
        get_profile(self.profile)  # unknown profiles fail at construction, listing the known ones

    @property
    def runtime_profile(self) -> RuntimeProfile:
        return get_profile(self.profile)

    @property
    def source_digest(self) -> str:
        return self.runtime_profile.source_digest

    def __artifact_identity__(self) -> dict[str, str]:
        return {"profile": self.profile, "source_digest": self.source_digest}
