"""rlaunch's adapter for upstream SkyRL 0.4.0 (the `fsdp` and `megatron` runtimes).

It runs inside the runtime's own environment (Python 3.12, CUDA, skyrl[fsdp|megatron]) and never
imports rlaunch: the launch document is its only input.
"""
