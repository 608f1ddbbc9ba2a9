"""Supervised fine-tuning as a library step: a warm start before RL.

from rlaunch.training import SftSettings, sft_step
"""

from rlaunch.training.warm_start import SftArtifactStep, SftSettings, sft_step

__all__ = ["SftArtifactStep", "SftSettings", "sft_step"]
