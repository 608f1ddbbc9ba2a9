"""The runtime profile registry and the source digest.

A profile directory holds `profile.yaml` (strategy, entrypoints, capabilities, environment) and
`lock.txt` (exact package versions). The profile names a base config in `base_configs/` (the
recipe keys it accepts, with defaults, on SkyRL 0.4.0 key paths) and an adapter in `adapters/`
(the code rlaunch ships to run inside that environment). The source digest hashes the lock, the
profile, the base config and every adapter file, so it changes exactly when what will run
changes. It reads exactly the files that ship (`SHIPPED_PROFILE_FILES`, `SHIPPED_ADAPTER_FILES`;
the wheel's package data is `package_data()`, which a test holds equal to pyproject's), so a
wheel and a checkout of one commit give one digest.
"""

from __future__ import annotations

import copy
import functools
import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from rlaunch.errors import UserError
from rlaunch.launch_config.composition import BaseConfigShape, RecipeProblem, compose, leaves
from rlaunch.launch_config.task_env import check_task_env
from rlaunch.runtimes import parsed
from rlaunch.runtimes.defects import KnownDefect

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

SHAPE_KEY = "_rlaunch"  # the generated base config's description of its own shape, not a SkyRL key
PLUGINS_ENV = "RLAUNCH_RUNTIME_PLUGINS"
_PROFILE_DIRS = {"trl-cpu": "trl_cpu", "fsdp": "fsdp", "fsdp-rehearsal": "fsdp_rehearsal", "megatron": "megatron"}
_HERE = os.path.dirname(os.path.abspath(__file__))
# What ships with a runtime: globs ('*' within one path segment) relative to a profile directory
# and to an adapter directory. The digest reads exactly these files, the wheel ships exactly these.
SHIPPED_PROFILE_FILES = ("*.yaml", "*.txt", "*.in", "*.toml")  # *.toml: uv.toml, the GPU locks' build settings
SHIPPED_ADAPTER_FILES = ("*/*.py",)
LAUNCHERS = ("python", "torchrun", "ray-driver")
RAY_DRIVER = "ray-driver"


class UnknownRuntimeError(UserError, ValueError):
    pass


@dataclass(frozen=True)
class Capabilities:
    """Which geometries and recipe settings a runtime honours; the preflight refuses the rest.

    `honoured_keys`: dotted base-config keys (`prefix.*` wildcards allowed) the runtime acts on;
    None means every key. A key outside it must keep its base-config default.
    `allowed_values`: dotted key -> the only values accepted for that (honoured) key.
    `shipped_reward`: the trainer scores with a reward function of the experiment's shipped code
    (the document's `code.reward`, `SkyRLSpec(reward=...)`) instead of the built-in env class.
    """

    accelerator: str  # "cpu" (device slots are processes) or "gpu"
    colocated: bool = True
    disaggregated: bool = True
    max_inference_tensor_parallel: int | None = None
    max_inference_pipeline_parallel: int | None = None
    max_nodes: int | None = None
    honoured_keys: tuple[str, ...] | None = None  # None: every base-config key is honoured
    allowed_values: Mapping[str, tuple[Any, ...]] | None = None  # None: any value of an honoured key
    shipped_reward: bool = False

    def __post_init__(self) -> None:
        if self.honoured_keys is not None and not isinstance(self.honoured_keys, tuple):
            object.__setattr__(self, "honoured_keys", tuple(self.honoured_keys))
        if self.allowed_values is not None:
            normalised = {
                str(k): tuple(v) if isinstance(v, (list, tuple)) else (v,) for k, v in dict(self.allowed_values).items()
            }
            object.__setattr__(self, "allowed_values", MappingProxyType(normalised))

    def honours(self, key: str) -> bool:
        if self.honoured_keys is None:
            return True
        return any(key == k or (k.endswith(".*") and key.startswith(k[:-1])) for k in self.honoured_keys)

    def accepts(self, key: str, value: Any) -> bool:
        """Whether `value` is an accepted value for the honoured `key` (True when unrestricted)."""
        if not self.allowed_values or key not in self.allowed_values:
            return True
        return any(_same_value(value, allowed) for allowed in self.allowed_values[key])


@dataclass(frozen=True)
class RuntimeProfile:
    name: str
    # Paths are strings: pathlib (with urllib.parse and ipaddress) would be a sixth of a cold
    # preflight's imports, and the preflight never touches these files.
    directory: str
    base_config_file: str
    adapter_dir: str
    strategy: str
    strategy_aliases: Mapping[str, str]
    entrypoints: Mapping[str, str]
    # "python" (one process per replica), "torchrun" (one process per device slot), or "ray-driver"
    # (the trainer is a Ray driver: the gang runs one Ray cluster and rank 0 runs the driver in it)
    launcher: str
    environment: str  # "venv" (built from lock.txt) or "host" (the interpreter running rlaunch)
    python: str
    capabilities: Capabilities
    description: str = ""
    known_defects: tuple[KnownDefect, ...] = ()
    # A rehearsal runtime runs on logical GPUs until its first GPU-only import (rlaunch.task.rehearsal)
    rehearsal: bool = False
    task_env: Mapping[str, str] = field(
        default_factory=dict
    )  # fixed variables for the trainer (launch_config.task_env)
    env_passthrough: tuple[str, ...] = ()  # names / PREFIX* patterns copied from the submitting environment
    data_fields: tuple[str, ...] = ()  # the fields every data row must carry (rlaunch.rules.data_rules)

    @property
    def lock_file(self) -> Path:
        from pathlib import Path

        return Path(self.directory, "lock.txt")

    @functools.cached_property
    def _parsed_base_config(self) -> tuple[dict[str, Any], BaseConfigShape]:
        tree = dict(parsed.load(self.base_config_file) or {})  # a copy: the parsed file is shared
        return tree, BaseConfigShape.of(tree.pop(SHAPE_KEY, None))

    def base_config(self) -> dict[str, Any]:
        """A fresh copy of the base config (each file parsed once per process), without its `_rlaunch` shape block."""
        return copy.deepcopy(self._parsed_base_config[0])

    @property
    def base_shape(self) -> BaseConfigShape:
        """Which mappings of the base config are free-form and which sections are optional."""
        return self._parsed_base_config[1]

    def compose(self, recipe: Mapping[str, Any]) -> tuple[dict[str, Any], list[RecipeProblem]]:
        """`recipe` laid over this profile's base config (see `rlaunch.launch_config.composition.compose`)."""
        return compose(self.base_config(), recipe, self.base_shape)

    def lock_requirements(self) -> list[str]:
        """Every requirement of the lock, as written (hashes and comments dropped)."""
        return [requirement for _, _, requirement in self._lock]

    @property
    def _lock(self) -> list[list[str]]:
        """[[canonical name, exact version or None, requirement], ...] (`parsed`: read once per process, from
        the lock's JSON twin when it is fresh)."""
        lock = os.path.join(self.directory, "lock.txt")  # not `lock_file`: the preflight stays free of pathlib
        return parsed.load(lock) if os.path.exists(lock) else []

    def trainer_processes(self, gpus_per_node: int) -> int:
        """Training processes one task starts: one per device slot under torchrun, else one driver."""
        return gpus_per_node if self.launcher == "torchrun" else 1

    def locked_versions(self) -> dict[str, str]:
        """{package: version} of every exact pin in the lock (read once per profile, like the base config)."""
        return dict(self._locked_versions)

    @functools.cached_property
    def _locked_versions(self) -> dict[str, str]:
        return {name: version for name, version, _ in self._lock if version is not None}

    def canonical_strategy(self, strategy: str) -> str:
        return self.strategy_aliases.get(strategy, strategy)

    def entrypoint_module(self, name: str) -> str:
        if name not in self.entrypoints:
            raise KeyError(
                f"entrypoint {name!r} is not registered for runtime {self.name!r}; registered: {sorted(self.entrypoints)}"
            )
        return self.entrypoints[name]

    @functools.cached_property
    def source_digest(self) -> str:
        return source_digest(self.directory, self.adapter_dir, self.base_config_file)


def source_digest(directory: str, adapter_dir: str, base_config_file: str) -> str:
    """sha256 over the shipped files of a profile directory (lock, profile) and of its adapter, and its base config."""
    import hashlib

    h = hashlib.sha256()
    for label, root, shipped in (
        ("profile", directory, SHIPPED_PROFILE_FILES),
        ("adapter", adapter_dir, SHIPPED_ADAPTER_FILES),
    ):
        for relative in shipped_files(root, shipped):
            h.update(f"{label}/{relative}".encode() + b"\0" + _read(os.path.join(root, relative)) + b"\0")
    h.update(b"base_config\0" + _read(base_config_file))
    return h.hexdigest()


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def shipped_files(directory: str, patterns: tuple[str, ...]) -> list[str]:
    """'/'-separated paths under `directory` that one of `patterns` matches segment by segment
    (as package data globs do), in path order, part by part."""
    import fnmatch

    def ships(relative: str) -> bool:
        parts = relative.split("/")
        return any(
            len(glob := pattern.split("/")) == len(parts) and all(map(fnmatch.fnmatchcase, parts, glob))
            for pattern in patterns
        )

    out = []
    for root, _, files in os.walk(directory):
        for name in files:
            relative = os.path.relpath(os.path.join(root, name), directory).replace(os.sep, "/")
            if ships(relative):
                out.append(relative)
    return sorted(out, key=lambda p: p.split("/"))


def package_data() -> list[str]:
    """The wheel's package data for `rlaunch` (pyproject's `[tool.setuptools.package-data]`): every
    profile's and adapter's shipped files, and the profiles' parsed JSON twins."""
    profiles = [f"runtimes/*/{p}" for p in SHIPPED_PROFILE_FILES] + [f"runtimes/*/*{parsed.TWIN_SUFFIX}"]
    return profiles + [f"runtimes/adapters/*/{p}" for p in SHIPPED_ADAPTER_FILES]


def load_profile(name: str, directory: str | os.PathLike[str]) -> RuntimeProfile:
    directory = os.fspath(directory)
    raw = parsed.load(os.path.join(directory, "profile.yaml"))
    caps = dict(raw.get("capabilities") or {})
    launcher = raw.get("launcher", "python")
    if launcher not in LAUNCHERS:
        raise ValueError(
            f"runtime {name!r}: launcher={launcher!r} in {os.path.join(directory, 'profile.yaml')}; choose one of {LAUNCHERS}"
        )
    task_env, passthrough = check_task_env(
        f"runtime profile {name!r}", raw.get("task_env") or {}, raw.get("env_passthrough") or ()
    )
    if "honoured_keys" in caps and caps["honoured_keys"] is not None:
        caps["honoured_keys"] = tuple(caps["honoured_keys"])
    return RuntimeProfile(
        name=name,
        directory=directory,
        base_config_file=_base_config_file(directory, raw["base_config"]),
        adapter_dir=os.path.realpath(os.path.join(directory, raw["adapter"]))
        if "adapter" in raw
        else os.path.join(directory, "adapter"),
        strategy=raw["strategy"],
        strategy_aliases=dict(raw.get("strategy_aliases") or {}),
        entrypoints=dict(raw["entrypoints"]),
        launcher=launcher,
        environment=raw.get("environment", "venv"),
        python=str(raw.get("python", "3.11")),
        capabilities=Capabilities(**caps),
        description=raw.get("description", ""),
        known_defects=_known_defects(directory, raw.get("known_defects")),
        rehearsal=raw.get("rehearsal") is True,
        task_env=MappingProxyType(task_env),
        env_passthrough=passthrough,
        data_fields=tuple(str(f) for f in raw.get("data_fields") or ()),
    )


def _known_defects(directory: str, spec: str | list[Any] | None) -> tuple[KnownDefect, ...]:
    """Inline `known_defects` entries, or a shared list by name (`skyrl-0.4.0` -> known_defects/<name>.yaml)."""
    where = os.path.join(directory, "profile.yaml")
    if isinstance(spec, str):
        where = os.path.join(_HERE, "known_defects", f"{spec}.yaml")
        spec = (parsed.load(where) or {}).get("defects")
    return tuple(KnownDefect.from_yaml(entry, where) for entry in spec or ())


def _base_config_file(directory: str, name: str) -> str:
    """A shared base config by name (`skyrl-0.4.0`), or a `.yaml` path relative to the profile."""
    return (
        os.path.join(directory, name) if name.endswith(".yaml") else os.path.join(_HERE, "base_configs", f"{name}.yaml")
    )


_registry: dict[str, RuntimeProfile] = {}
_plugins_loaded: list[str] = []


def register_profile(profile: RuntimeProfile) -> None:
    _registry[profile.name] = profile


def _ensure_loaded(only: str | None = None) -> None:
    """Register the built-in profiles (just `only` when it is one of them) and the plugins."""
    wanted = [only] if only in _PROFILE_DIRS else list(_PROFILE_DIRS)
    for name in wanted:
        if name not in _registry:
            register_profile(load_profile(name, os.path.join(_HERE, _PROFILE_DIRS[name])))
    for module in (m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",")):
        if module and module not in _plugins_loaded:
            importlib.import_module(module)
            _plugins_loaded.append(module)


def get_profile(name: str) -> RuntimeProfile:
    _ensure_loaded(name)
    if name not in _registry:
        raise UnknownRuntimeError(
            f"runtime profile {name!r} is not registered; choose one of {sorted(_registry)} "
            f"(plugins load from ${PLUGINS_ENV})"
        )
    return _registry[name]


def profile_names() -> list[str]:
    _ensure_loaded()
    return sorted(_registry)


def _same_value(a: Any, b: Any) -> bool:
    """Equality that keeps booleans apart from the integers 0 and 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    same: bool = a == b
    return same


def unsupported_settings(profile: RuntimeProfile, recipe: Mapping[str, Any]) -> list[tuple[str, object, str]]:
    """Every setting of a composed `recipe` that `profile` cannot honour, as (key, value, reason).

    Pure: compares the recipe's leaves with the profile's base config and capabilities. A key
    outside `capabilities.honoured_keys` must equal its base-config default; an honoured key
    listed in `capabilities.allowed_values` must take one of those values; a key the base config
    does not have is reported too. Sorted by key; empty when the recipe is fine.
    """
    caps = profile.capabilities
    stops = profile.base_shape.stops
    base = dict(leaves(profile.base_config(), stop=stops))
    given = dict(leaves(recipe, stop=stops))
    out: list[tuple[str, object, str]] = []
    for key in sorted(set(given) - set(base)):
        out.append(
            (
                key,
                given[key],
                f"not a key of the {os.path.splitext(os.path.basename(profile.base_config_file))[0]} base config",
            )
        )
    for key in sorted(base):
        default = base[key]
        value = given.get(key, default)
        if not caps.honours(key):
            if not _same_value(value, default):
                out.append(
                    (
                        key,
                        value,
                        f"runtime {profile.name!r} does not honour this key; only the base-config default {default!r} is accepted",
                    )
                )
        elif not caps.accepts(key, value):
            allowed = list(caps.allowed_values[key]) if caps.allowed_values else []
            out.append((key, value, f"runtime {profile.name!r} accepts only {allowed!r}"))
    return sorted(out, key=lambda item: item[0])
