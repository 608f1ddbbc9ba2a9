"""The composed recipe as SkyRL 0.4.0 takes it: a dotlist of `key.path=<JSON value>` overrides.

SkyRL 0.4.0 reads no YAML file; its entrypoints parse `sys.argv[1:]` with OmegaConf into typed
dataclasses. JSON-encoding every value keeps nulls, booleans and numeric-looking strings intact
through that parse.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

# Keys rlaunch's base config carries for the launcher, not for SkyRL's dataclasses.
RLAUNCH_ONLY = frozenset({"trainer.export_hf_artifact"})


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in tree.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, path)
        else:
            yield path, value


def to_dotlist(skyrl: Mapping[str, Any]) -> list[str]:
    return [f"{path}={json.dumps(value)}" for path, value in _leaves(skyrl) if path not in RLAUNCH_ONLY]
