"""Package attributes that import their module on first use (PEP 562).

A package `__init__` that re-exports its public names eagerly makes `import package` pay for
every submodule: the preflight would load the artifact runner, the host the whole graph code.
`lazy_exports` gives a package a module-level `__getattr__` that imports the owning submodule
only when a name is first read, so `from rlaunch.skyrl import check_plan` loads the preflight and
nothing else.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], exports: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`(__getattr__, __dir__)` for the package whose `globals()` is `namespace`.

    `exports` maps each submodule (relative to the package, or a whole `rlaunch.` name for a module
    outside it) to the public names it defines; they must be exactly the package's `__all__`, so the two lists cannot drift apart.
    """
    package = namespace["__name__"]
    owner = {name: module for module, names in exports.items() for name in names}
    if sorted(owner) != sorted(namespace.get("__all__", ())):
        raise ImportError(
            f"{package}: __all__ and the lazy exports differ: {sorted(set(owner) ^ set(namespace['__all__']))}"
        )

    def __getattr__(name: str) -> Any:
        module = owner.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(
            importlib.import_module(module if module.startswith("rlaunch.") else f"{package}.{module}"), name
        )
        namespace[name] = value  # later reads skip this hook
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(owner))

    return __getattr__, __dir__
