"""Dump SkyRL's own default config for the installed version: `python -m rlaunch_skyrl.base_config`.

Runs in an environment where `skyrl` is installed (the fsdp/megatron runtimes, or the contract
tier's Python 3.12 venv) and prints the YAML rlaunch commits as
`runtimes/base_configs/skyrl-<version>.yaml`: every field of `SkyRLTrainConfig()` with its default,
nested exactly as SkyRL's dataclasses nest, plus one `_rlaunch` block describing the tree's shape:

* `open_mappings`: fields typed as a free-form dict (`engine_init_kwargs`, `model_config_kwargs`,
  ...): SkyRL passes them through as-is, so any key is accepted under them;
* `optional_sections`: fields typed `Optional[<dataclass>]` that default to None
  (`mixed_precision`, ...): a recipe may give them as a mapping of that dataclass's fields
  (recorded with their defaults; a field SkyRL requires is recorded as null).

The defaults are the declared ones: SkyRL derives some values in `__post_init__` when they are
left unset (`generator.max_input_length` from `trainer.max_prompt_length`, the reference model's
path from the policy's, ...); those stay unset (null) here, so SkyRL still derives them from the
recipe's own values. Defaults SkyRL computes from the machine (`os.path.expanduser("~/ckpts/")`) are written with
`~`, so the dump is the same on every machine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
import sys
import types
import typing
from collections.abc import Iterator
from importlib import metadata
from typing import Any

import yaml

SHAPE_KEY = "_rlaunch"
HEADER = """\
# GENERATED from the installed skyrl=={version} by rlaunch_skyrl.base_config: do not edit.
# Regenerate (builds the Python 3.12 contract environment once): python -m scripts.skyrl_regen base-config
# tests/contract/skyrl checks that this file equals what the installed package dumps.
#
# Every key of SkyRL's SkyRLTrainConfig() with its default: a recipe composes onto this tree, and a
# key that is not here is refused. `_rlaunch` is not part of SkyRL's tree: it records which
# mappings are free-form (any key) and which optional sections take a mapping of known keys.
"""


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else hint), True
    return hint, False


def _is_dict_type(hint: Any) -> bool:
    hint, _ = _unwrap_optional(hint)
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return hint is dict or typing.get_origin(hint) is dict


def _plain(value: Any) -> Any:
    """A YAML-safe copy with machine-specific home paths written as `~`."""
    home = os.path.expanduser("~")
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, str) and home not in ("", "/") and (value == home or value.startswith(home + "/")):
        return "~" + value[len(home) :]
    if dataclasses.is_dataclass(value):
        return _plain(dataclasses.asdict(value))
    return value


def _defaults(cls: type) -> Any:
    """An instance of `cls` built from its defaults; a required field (no default) is None."""
    values = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            values[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            values[f.name] = f.default_factory()
        else:
            values[f.name] = None
    instance = object.__new__(cls)
    for name, value in values.items():
        object.__setattr__(instance, name, value)
    return instance


def describe(instance: Any, prefix: str = "") -> tuple[dict[str, Any], list[str], dict[str, Any]]:
    """(default tree, open mapping paths, optional section path -> its default tree) of a config dataclass."""
    tree: dict[str, Any] = {}
    open_paths: list[str] = []
    sections: dict[str, Any] = {}
    hints = typing.get_type_hints(type(instance), include_extras=True)
    for f in dataclasses.fields(instance):
        path = f"{prefix}{f.name}"
        value = getattr(instance, f.name)
        hint = hints.get(f.name, Any)
        inner, optional = _unwrap_optional(hint)
        if dataclasses.is_dataclass(value):
            sub, sub_open, sub_sections = describe(value, path + ".")
            tree[f.name] = sub
            open_paths += sub_open
            sections.update(sub_sections)
            continue
        if _is_dict_type(hint):
            open_paths.append(path)
        elif value is None and optional and isinstance(inner, type) and dataclasses.is_dataclass(inner):
            sub, sub_open, sub_sections = describe(_defaults(inner), path + ".")
            sections[path] = sub
            open_paths += sub_open
            sections.update(sub_sections)
        tree[f.name] = _plain(value)
    return tree, open_paths, sections


def _config_classes(cls: type, seen: set[type]) -> set[type]:
    """`cls` and every dataclass its fields (recursively) are typed with."""
    if cls in seen:
        return seen
    seen.add(cls)
    for hint in typing.get_type_hints(cls).values():
        inner, _ = _unwrap_optional(hint)
        for candidate in (inner, *typing.get_args(inner)):
            if isinstance(candidate, type) and dataclasses.is_dataclass(candidate):
                _config_classes(candidate, seen)
    return seen


@contextlib.contextmanager
def declared_defaults(root: type) -> Iterator[None]:
    """Construct config dataclasses without their `__post_init__` derivations (restored after)."""
    saved = {c: vars(c)["__post_init__"] for c in _config_classes(root, set()) if "__post_init__" in vars(c)}
    try:
        for cls in saved:
            cls.__post_init__ = lambda self: None
        yield
    finally:
        for cls, method in saved.items():
            cls.__post_init__ = method


def dump() -> str:
    """The base config YAML for the installed skyrl."""
    from skyrl.train.config import SkyRLTrainConfig

    version = metadata.version("skyrl")
    with declared_defaults(SkyRLTrainConfig):
        tree, open_paths, sections = describe(SkyRLTrainConfig())
    shape = {"skyrl_version": version, "open_mappings": sorted(open_paths), "optional_sections": sections}
    body = yaml.safe_dump({SHAPE_KEY: shape, **tree}, sort_keys=False, default_flow_style=False, width=120)
    return HEADER.format(version=version) + body


def main() -> None:
    sys.stdout.write(dump())


if __name__ == "__main__":
    main()
