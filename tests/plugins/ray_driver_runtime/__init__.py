"""A registered test runtime (`test-ray-driver`) whose trainer is a Ray driver (`launcher: ray-driver`).

Its driver attaches to the gang's Ray cluster (RAY_ADDRESS), places a STRICT_SPREAD placement
group with one bundle per node asking for that node's logical GPUs, runs one task per bundle and
records where each ran (`ray_spread.json` in the attempt directory); then it writes the trainer's
records like `test-marker` (it shares that adapter). Runs in the host interpreter, which has the
`ray` extra. Load it with RLAUNCH_RUNTIME_PLUGINS=tests.plugins.ray_driver_runtime.
"""

from pathlib import Path

from rlaunch.runtimes.registry import load_profile, register_profile

register_profile(load_profile("test-ray-driver", Path(__file__).parent))
