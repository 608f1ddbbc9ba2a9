"""Runtime profiles: pinned trainer environments rlaunch can hand a launch document to.

Only the registry (pure data: locks, base configs, capabilities, digests) is importable from the
launcher side. Each profile's adapter runs inside the profile's own environment, where the heavy
dependencies (torch, trl, skyrl) live.
"""
