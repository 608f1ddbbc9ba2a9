"""A registered test runtime (`test-marker`) that follows the trainer's file contract without ML.

It runs in the host interpreter (nothing to install), so launch tests exercise coordinator, host,
child job, task bootstrap and manifests in seconds. Load it with
RLAUNCH_RUNTIME_PLUGINS=tests.plugins.marker_runtime.
"""

from pathlib import Path

from rlaunch.runtimes.registry import load_profile, register_profile

register_profile(load_profile("test-marker", Path(__file__).parent))
