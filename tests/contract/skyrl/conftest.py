"""Collected only inside the SkyRL contract tier (its Python 3.12 venv, where skyrl imports)."""

from tests.py312_tier import collect_only_inside

collect_ignore_glob = collect_only_inside("skyrl")
