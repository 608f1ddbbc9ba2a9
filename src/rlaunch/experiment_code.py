"""The experiment's own code, shipped to its jobs by identity (`ExperimentCode`).

A step job and the RL trainer do not run in the process that built the graph: a step job runs in
the coordinator's working directory, the trainer in its runtime's own environment, neither of which
is guaranteed to hold the experiment's modules as they were when the plan was fingerprinted.
`ExperimentCode(modules=("myexp.rewards",))` declares the modules to ship. Its identity is the
sha256 digest of the shipped files (each module's source file, a package's `.py` files, and the
`__init__.py` of every package above them, each by its import path), so it enters the fingerprint
of every step that declares it: editing the reward function makes a new version, and a replaying
coordinator that finds other files refuses the mismatch like any fingerprint change.

The modules are found on `sys.path` without importing them (nothing of the experiment runs in a
dry run) and must lie inside the working tree: the coordinator replays the main in a copy of it,
so code from elsewhere would reach the plan but not the coordinator. The coordinator publishes the
files it fingerprinted under the prefix, addressed by their digest (`publish`); a job stages them
(`stage`: every file's sha256 and the digest checked) into a directory it puts first on its
PYTHONPATH (`CODE_PATH_ENV` names it to the runtime processes the job starts).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import json
import os
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.machinery import ModuleSpec, PathFinder
from typing import Any

from rlaunch import storage
from rlaunch.errors import UserError
from rlaunch.paths import inside, remove_inside

CODE_PATH_ENV = "RLAUNCH_EXPERIMENT_CODE"  # the staged code a job's runtime processes import from
MANIFEST = "code.json"  # written last in a published bundle: its files, their sha256, the digest
CODE_ROOT = ".code"  # bundles under the prefix, one directory per digest


class ExperimentCodeError(UserError, ValueError):
    """Experiment code that cannot be shipped (not found, not source, outside the working tree), or a
    bundle whose files are not the ones fingerprinted."""


@dataclass(frozen=True)
class ExperimentCode:
    """Modules (`pkg.module`, or a package: all of its `.py` files) of the experiment to ship with a
    step job or an RL run. A pure value: the files are found and hashed when first asked for."""

    modules: tuple[str, ...]

    def __post_init__(self) -> None:
        if isinstance(self.modules, str) or not isinstance(self.modules, (tuple, list)):
            raise TypeError(
                f"ExperimentCode.modules must be a tuple of module names, e.g. ('myexp.rewards',), got {self.modules!r}"
            )
        object.__setattr__(self, "modules", tuple(dict.fromkeys(self.modules)))
        if not self.modules:
            raise ValueError("ExperimentCode.modules is empty; name at least one module, e.g. ('myexp.rewards',)")
        for name in self.modules:
            if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
                raise ValueError(
                    f"ExperimentCode.modules: {name!r} is not a dotted module name such as 'myexp.rewards'"
                )

    @functools.cached_property
    def files(self) -> Mapping[str, str]:
        """Each shipped file's import path (`myexp/rewards.py`) -> where it is here."""
        importlib.invalidate_caches()  # a module written since the last import is found
        found: dict[str, str] = {}
        for module in self.modules:
            found.update(_module_files(module))
        return dict(sorted(found.items()))

    @functools.cached_property
    def hashes(self) -> Mapping[str, str]:
        """Each shipped file's import path -> the sha256 of its bytes, as fingerprinted."""
        return {rel: _sha256(_read(path)) for rel, path in self.files.items()}

    @property
    def digest(self) -> str:
        """The identity of the shipped code: the sha256 of every file's import path and sha256."""
        return code_digest(self.hashes)

    def covers(self, module: str) -> bool:
        """Whether `module` is shipped: declared, or inside a declared package (read from the names alone)."""
        return any(module == name or module.startswith(name + ".") for name in self.modules)

    def function_problem(self, path: str, field: str) -> str | None:
        """Why `path` (`module:function`) is not a top-level function of the shipped code (None: it is)."""
        module, _, name = path.partition(":")
        if not self.covers(module):
            return (
                f"{field}={path!r}: {module} is not shipped; add it (or its package) to "
                f"ExperimentCode(modules={(*self.modules, module)!r})"
            )
        rel = module.replace(".", "/")
        source = self.files.get(f"{rel}.py") or self.files.get(f"{rel}/__init__.py")
        if source is None or name not in _top_level_names(_read(source), source):
            return f"{field}={path!r}: {source or rel} defines no top-level {name!r}; name a function defined in it"
        return None


def code_digest(hashes: Mapping[str, str]) -> str:
    return _sha256(json.dumps(dict(sorted(hashes.items())), separators=(",", ":")).encode("utf-8"))


def code_uri(prefix: str, digest: str) -> str:
    """Where the bundle of `digest` is published under `prefix`."""
    return storage.join(prefix, CODE_ROOT, digest)


def function_reference(path: str, field: str) -> str:
    """`path` if it reads `module:function` (a function the shipped code defines), else a ValueError naming `field`."""
    module, colon, name = path.partition(":") if isinstance(path, str) else ("", "", "")
    if not colon or not name.isidentifier() or not all(p.isidentifier() for p in module.split(".")):
        raise ValueError(
            f"{field}={path!r} must name a function as 'module:function', e.g. 'myexp.rewards:exact_match'"
        )
    return path


def publish(code: ExperimentCode, uri: str, digest: str) -> None:
    """Copy the shipped files to `uri`, refused unless they are the code `digest` fingerprinted (read
    again as they are copied); the manifest is written last, so a bundle with one is whole (and is
    then left as it is)."""
    if code.digest != digest:
        raise ExperimentCodeError(
            f"the experiment's code {', '.join(code.modules)} is {code.digest[:12]} here but was fingerprinted as "
            f"{digest[:12]}: a shipped file changed since the plan; run the experiment again"
        )
    if _manifest(uri) is not None:
        return
    for rel, path in code.files.items():
        data = _read(path)
        if _sha256(data) != code.hashes[rel]:
            raise ExperimentCodeError(
                f"{path} changed since the plan fingerprinted it (shipped as {rel}); run the experiment again to "
                "ship the code as it is now"
            )
        storage.write_bytes_atomic(storage.join(uri, rel), data)
    storage.write_json_atomic(
        storage.join(uri, MANIFEST), {"digest": code.digest, "modules": list(code.modules), "files": dict(code.hashes)}
    )


def stage(uri: str, digest: str, target: str, progress: Callable[[str], None], *, root: str) -> str:
    """The bundle `digest` at `uri` copied to local `target` (inside `root`), every file's sha256 and
    the digest checked before it is renamed into place; returns `target`."""
    inside(root, target)
    manifest = _manifest(uri)
    if manifest is None:
        raise ExperimentCodeError(f"{uri} holds no shipped code ({MANIFEST} is missing); the coordinator publishes it")
    hashes = dict(manifest.get("files") or {})
    if code_digest(hashes) != digest:
        raise ExperimentCodeError(
            f"{uri} holds the code {code_digest(hashes)[:12]}, not the code {digest[:12]} planned"
        )
    tmp = f"{target}.staging-{uuid.uuid4().hex[:8]}"
    try:
        for rel, expected in hashes.items():
            data = storage.read_bytes(storage.join(uri, rel))
            if _sha256(data) != expected:
                raise ExperimentCodeError(f"{uri}/{rel} does not match the sha256 its manifest lists")
            local = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with open(local, "wb") as handle:
                handle.write(data)
        remove_inside(root, target)
        os.rename(tmp, target)
    finally:
        remove_inside(root, tmp)
    progress(f"staged the experiment's code {digest[:12]} ({', '.join(manifest.get('modules') or ())}) -> {target}")
    return target


def _manifest(uri: str) -> dict[str, Any] | None:
    found = storage.read_json(storage.join(uri, MANIFEST))
    return found if isinstance(found, dict) else None


def _module_files(module: str) -> dict[str, str]:
    """The files that make `module` importable elsewhere: its own (a package: every `.py` under it)
    and the `__init__.py` of each package above it, by import path."""
    parts = module.split(".")
    search: list[str] | None = None
    files: dict[str, str] = {}
    spec: ModuleSpec | None = None
    for depth in range(1, len(parts) + 1):
        name = ".".join(parts[:depth])
        spec = PathFinder.find_spec(name, search)
        if spec is None:
            raise ExperimentCodeError(
                f"ExperimentCode: module {name!r} is not found on the path of this process (from {os.getcwd()}); "
                "run the experiment from the directory that holds it (`python -m pkg.main` from the checkout) "
                "or correct the name"
            )
        prefix = "/".join(parts[:depth])
        if spec.submodule_search_locations is not None and spec.origin and spec.has_location:
            files[f"{prefix}/__init__.py"] = spec.origin  # a regular package; a namespace package has none
        if depth < len(parts):
            if spec.submodule_search_locations is None:
                raise ExperimentCodeError(
                    f"ExperimentCode: {name!r} is a module, not a package, so {module!r} is not found"
                )
            search = list(spec.submodule_search_locations)
    assert spec is not None
    if spec.submodule_search_locations is not None:
        for location in spec.submodule_search_locations:
            files.update(_package_files(location, "/".join(parts)))
    elif spec.origin and spec.origin.endswith(".py"):
        files["/".join(parts) + ".py"] = spec.origin
    else:
        raise ExperimentCodeError(
            f"ExperimentCode: module {module!r} is {spec.origin or 'built in'}, not Python source; ship source "
            "modules, and put compiled libraries in the runtime's lock"
        )
    for rel, path in files.items():
        if not _within(path, os.getcwd()):
            raise ExperimentCodeError(
                f"ExperimentCode: {module!r} ships {path}, outside the working tree {os.getcwd()} the coordinator "
                f"replays the experiment in; move {rel} into the working tree (or run from a directory that holds it)"
            )
    return files


def _package_files(location: str, prefix: str) -> dict[str, str]:
    found = {}
    for directory, subdirectories, names in os.walk(location):
        subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__" and not d.startswith("."))
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                found[f"{prefix}/{os.path.relpath(path, location).replace(os.sep, '/')}"] = path
    return found


def _within(path: str, root: str) -> bool:
    real, real_root = os.path.realpath(path), os.path.realpath(root)
    return real.startswith(real_root.rstrip(os.sep) + os.sep)


def _top_level_names(source: bytes, where: str) -> set[str]:
    """Names a module binds at its top level (functions, classes, assignments, imports), read without running it."""
    try:
        tree = ast.parse(source, filename=where)
    except SyntaxError as exc:
        raise ExperimentCodeError(f"ExperimentCode: {where} does not parse ({exc.msg}, line {exc.lineno})") from None
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def _read(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def on_path(directory: str) -> None:
    """Put staged code first on this process's import path and on that of the runtime processes it starts."""
    sys.path.insert(0, directory)
    importlib.invalidate_caches()
    os.environ[CODE_PATH_ENV] = directory
