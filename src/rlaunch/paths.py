"""Where a document may point, and deleting only inside a root.

A launch document names two kinds of location. Storage locations (where artifacts, checkpoints
and manifests live) are absolute paths or URLs. Task-local paths (where an input is staged) are
relative: normalised, without `..`, a leading `/` or a scheme, so joined onto the task's own root
they stay inside it. Whatever a document says, anything that deletes checks the resolved real
path against its root first (`remove_inside`): a symlink or a hand-edited document cannot turn
a cleanup into the loss of someone else's directory.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil

from rlaunch.errors import UserError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


class ConfinementError(UserError, ValueError):
    """A path that would leave the root it must stay in."""


def relative_path_problem(value: object, *, root: str = "the staging root") -> str | None:
    """Why `value` is not a normalised relative path that stays inside `root` (None: it is)."""
    if not isinstance(value, str) or not value:
        return "must be a non-empty relative path"
    if "\x00" in value or "\\" in value:
        return "contains a NUL or a backslash; write a plain relative path with '/'"
    if "://" in value or _SCHEME.match(value):
        return f"has a URL scheme; write a path relative to {root}"
    if value.startswith("/") or value.startswith("~"):
        return f"is absolute; write a path relative to {root}"
    if ".." in value.split("/"):
        return f"contains '..'; it would leave {root}"
    normal = posixpath.normpath(value)
    if normal != value or normal == ".":
        return f"is not normalised; write {normal!r}" if normal != "." else "names the root itself"
    return None


def location_problem(value: object) -> str | None:
    """Why `value` is not a storage location (an absolute path or a URL) (None: it is)."""
    if not isinstance(value, str) or not value:
        return "must be an absolute path or a URL"
    if "\x00" in value:
        return "contains a NUL"
    path = value.split("://", 1)[1] if "://" in value else value
    if "://" not in value and not value.startswith("/"):
        return "is relative, so it would land wherever the process happens to run; write an absolute path or a URL"
    if ".." in path.split("/"):
        return "contains '..'; write the location it means"
    return None


def inside(root: str, path: str, *, follow_last: bool = True) -> str:
    """The real path of `path`, which must lie strictly inside the real path of `root`.

    `follow_last=False` resolves only the parent (for removing a symlink itself, not its target)."""
    real_root = os.path.realpath(root)
    if follow_last:
        real = os.path.realpath(path)
    else:
        real = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
    if real == real_root or os.path.commonpath([real_root, real]) != real_root:
        where = "is the root itself" if real == real_root else f"resolves to {real}, outside {real_root}"
        raise ConfinementError(f"{path} {where}; refusing to touch it (the document names a path that leaves its root)")
    return real


def join_inside(root: str, relative: str, *, field: str) -> str:
    """`root/relative`, refused unless `relative` is a clean relative path that stays inside `root`."""
    problem = relative_path_problem(relative)
    if problem:
        raise ConfinementError(f"{field}={relative!r} {problem}")
    return inside(root, os.path.join(root, relative))


def remove_inside(root: str, path: str) -> None:
    """Delete the tree at `path`, only after checking its real path lies inside `root`."""
    if not os.path.lexists(path):
        return
    if os.path.islink(path):
        os.unlink(inside(root, path, follow_last=False))
        return
    shutil.rmtree(inside(root, path))
