"""Read a runtime's lock: every package of its environment, pinned exactly, with sha256 hashes.

A lock is a requirements file as `uv pip compile --generate-hashes` writes it: one requirement
per logical line (a trailing backslash continues it), `--hash=sha256:...` options after it,
comments after `#`. Names and versions are read by `packaging` (PEP 508 / PEP 440), never by
hand: `canonicalize_name` makes `Jinja2` and `jinja2` one package, and `Version` orders a
pre-release before its release.
"""

from __future__ import annotations

from dataclasses import dataclass

HASH_OPTION = "--hash="


@dataclass(frozen=True)
class Pin:
    """One requirement of a lock: its canonical name, the exact version (None unless `==`) and hashes."""

    name: str
    version: str | None
    requirement: str  # the requirement as written, options and comments dropped
    hashes: tuple[str, ...] = ()


class LockError(ValueError):
    pass


def logical_lines(text: str) -> list[str]:
    """The requirement lines of a lock, continuations joined and comments dropped."""
    out: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            out.append(line)
    if pending.strip():
        out.append(pending.strip())
    return out


def read_lock(text: str, where: str = "lock") -> tuple[Pin, ...]:
    """Every requirement of the lock `text` (`where` names it in errors)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    pins = []
    for line in logical_lines(text):
        words = line.split()
        requirement = " ".join(w for w in words if not w.startswith("--"))
        hashes = tuple(w[len(HASH_OPTION) :] for w in words if w.startswith(HASH_OPTION))
        try:
            parsed = Requirement(requirement)
        except InvalidRequirement as exc:
            raise LockError(
                f"{where}: {requirement!r} is not a requirement ({exc}); fix the line or regenerate the lock"
            ) from None
        exact = [s.version for s in parsed.specifier if s.operator in ("==", "===") and "*" not in s.version]
        version = exact[0] if len(parsed.specifier) == 1 and exact else None
        pins.append(Pin(canonicalize_name(parsed.name), version, requirement, hashes))
    return tuple(pins)


def read_lock_file(path: str) -> tuple[Pin, ...]:
    with open(path, encoding="utf-8") as handle:
        return read_lock(handle.read(), path)
