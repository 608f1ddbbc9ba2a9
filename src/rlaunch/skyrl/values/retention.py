"""How long run state is kept: resumable checkpoints and the TTL of temporary storage."""

from __future__ import annotations

from dataclasses import dataclass

from rlaunch.field_checks import require_int

MAX_RESUME_CHECKPOINTS = 5


@dataclass(frozen=True)
class SkyRLRetentionPolicy:
    resume_checkpoint_count: int = 2
    temporary_storage_ttl_days: int = 14

    def __post_init__(self) -> None:
        require_int("SkyRLRetentionPolicy", "resume_checkpoint_count", self.resume_checkpoint_count)
        require_int("SkyRLRetentionPolicy", "temporary_storage_ttl_days", self.temporary_storage_ttl_days)
        if not 1 <= self.resume_checkpoint_count <= MAX_RESUME_CHECKPOINTS:
            raise ValueError(
                f"SkyRLRetentionPolicy.resume_checkpoint_count={self.resume_checkpoint_count} must be between one "
                f"and five (it is the rolling number of resumable checkpoints kept)"
            )
        if self.temporary_storage_ttl_days <= 0:
            raise ValueError(
                f"SkyRLRetentionPolicy.temporary_storage_ttl_days={self.temporary_storage_ttl_days} must be positive"
            )
