"""Durable state as files under a prefix, through fsspec: the ground floor every package shares.

fsspec is imported only when a path is first touched, so importing this module (and everything
built on it: the preflight, the host, the task) costs nothing until I/O happens. Every write here is atomic: a local file is written under a temporary name and renamed; an object
store gets a single put. `create_exclusive` writes a file only if it does not exist yet, which is
what terminal manifests and locks need.
"""

from __future__ import annotations

import datetime
import json
import os
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import fsspec

PREFIX_ENV = "RLAUNCH_PREFIX"
DEFAULT_PREFIX_DIR = "rlaunch-artifacts"


def default_prefix() -> str:
    """`RLAUNCH_PREFIX` (any fsspec URL), else `./rlaunch-artifacts` made absolute."""
    configured = os.environ.get(PREFIX_ENV)
    if configured:
        return configured if "://" in configured else os.path.abspath(os.path.expanduser(configured))
    return os.path.abspath(DEFAULT_PREFIX_DIR)


def join(base: str, *parts: str) -> str:
    """Join URL or path segments with single slashes (a trailing slash never yields `//`)."""
    if "://" in base:
        scheme, rest = base.split("://", 1)
        head = f"{scheme}://{rest.rstrip('/')}"
    else:
        head = base.rstrip("/") or "/"
    tail = "/".join(p.strip("/") for p in parts if p and p.strip("/"))
    if not tail:
        return head
    return f"{head}{tail}" if head.endswith("/") else f"{head}/{tail}"


def utc_now() -> str:
    """Now, as an ISO-8601 UTC timestamp with milliseconds (the one clock format of every record)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def filesystem(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    import fsspec.core

    fs, path = fsspec.core.url_to_fs(url)
    return fs, path


def _is_local_fs(fs: fsspec.AbstractFileSystem) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def is_local(url: str) -> bool:
    return _is_local_fs(filesystem(url)[0])


def local_path(url: str) -> str:
    """The filesystem path of a local URL; raises for remote storage."""
    fs, path = filesystem(url)
    if not _is_local_fs(fs):
        raise ValueError(f"{url} is not on the local filesystem")
    return path


def exists(url: str) -> bool:
    fs, path = filesystem(url)
    return fs.exists(path)


def read_bytes(url: str) -> bytes:
    fs, path = filesystem(url)
    return fs.cat_file(path)


def read_text(url: str) -> str:
    return read_bytes(url).decode("utf-8")


def read_json(url: str) -> Any | None:
    """The parsed JSON at `url`, or None when the file does not exist."""
    fs, path = filesystem(url)
    try:
        data = fs.cat_file(path)
    except FileNotFoundError:
        return None
    return json.loads(data)


def dumps(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def write_bytes_atomic(url: str, data: bytes) -> None:
    fs, path = filesystem(url)
    if _is_local_fs(fs):
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex}")
        try:
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return
    fs.pipe_file(path, data)


def write_json_atomic(url: str, obj: Any) -> None:
    write_bytes_atomic(url, dumps(obj))


def write_text_atomic(url: str, text: str) -> None:
    write_bytes_atomic(url, text.encode("utf-8"))


def create_exclusive(url: str, data: bytes) -> bool:
    """Write `data` at `url` only if nothing is there; False when it already existed.

    Local files get a real exclusive create (hard link of a fully written temporary file). Object
    stores without conditional puts get check-then-put, which is as strong as the store allows.
    """
    fs, path = filesystem(url)
    if _is_local_fs(fs):
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex}")
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False
        except OSError:
            # No hard links on this filesystem: an exclusive open is still exclusive, though a
            # reader may briefly see the file before its bytes (lock readers tolerate that).
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            return True
        finally:
            os.unlink(tmp)
    if fs.exists(path):
        return False
    fs.pipe_file(path, data)
    return True


def remove(url: str, recursive: bool = False) -> None:
    fs, path = filesystem(url)
    if fs.exists(path):
        fs.rm(path, recursive=recursive)


def rename(src: str, dst: str) -> bool:
    """Move `src` to `dst`; False if `src` vanished first (someone else moved it)."""
    fs, spath = filesystem(src)
    _, dpath = filesystem(dst)
    if _is_local_fs(fs):
        try:
            os.rename(spath, dpath)
            return True
        except FileNotFoundError:
            return False
    try:
        fs.mv(spath, dpath)
        return True
    except FileNotFoundError:
        return False


def list_names(url: str) -> list[str]:
    """Base names of the entries directly under `url` (empty when it does not exist)."""
    fs, path = filesystem(url)
    try:
        entries = fs.ls(path, detail=False)
    except FileNotFoundError:
        return []
    return sorted(os.path.basename(str(e).rstrip("/")) for e in entries)
