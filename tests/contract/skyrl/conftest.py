"""Collected only inside the SkyRL contract tier (its Python 3.12 venv, where skyrl imports)."""

from tests.support.py312_tier import collect_only_inside

collect_ignore_glob = collect_only_inside("skyrl")

if not collect_ignore_glob:  # inside the tier: the SkyRL adapter imports as it does in the runtime
    import sys

    from rlaunch.runtimes.registry import get_profile

    sys.path.insert(0, str(get_profile("fsdp").adapter_dir))
