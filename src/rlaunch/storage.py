"""Durable state as files under a prefix: the ground floor every package shares.

A location is a plain path, a `file://` URL or any fsspec URL. Local locations (the common case:
the default prefix, local job state, staged inputs) are served with `os` directly and never
import fsspec; any other URL imports fsspec on first touch. The local path is the one fsspec's
`LocalFileSystem` would use (`~` expanded, relative to the working directory, no trailing
slash), and each operation keeps fsspec's semantics, so the two routes behave alike.

Every write is atomic: a local file is written under a temporary name, fsynced and renamed; an
object store gets a single put. `create_exclusive` writes a file only if it does not exist yet,
which is what terminal manifests, cancel records and locks need. Also here: the one clock format
of every record (`utc_now`, `utc_from_epoch`) and the one JSON encoding (`dumps`).
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rlaunch.errors import UserError

if TYPE_CHECKING:  # pragma: no cover
    import hashlib

    import fsspec

PREFIX_ENV = "RLAUNCH_PREFIX"
DEFAULT_PREFIX_DIR = "rlaunch-artifacts"


class StorageError(UserError, ValueError):
    """A location rlaunch cannot use: an fsspec filesystem not installed here, a root as a prefix."""


def default_prefix() -> str:
    """`RLAUNCH_PREFIX` (any fsspec URL), else `./rlaunch-artifacts` made absolute."""
    configured = os.environ.get(PREFIX_ENV)
    if configured:
        prefix = configured if "://" in configured else os.path.abspath(os.path.expanduser(configured))
        return checked_prefix(prefix, field=PREFIX_ENV)
    return os.path.abspath(DEFAULT_PREFIX_DIR)


def checked_prefix(prefix: str, *, field: str) -> str:
    """`prefix`, unless it is a filesystem or bucket root (outputs, `.jobs` and `.tmp` need a directory of
    their own) or holds a NUL byte (no filesystem can name it)."""
    if "\x00" in prefix:
        raise StorageError(
            f"{field}={prefix!r} holds a NUL byte (\\x00), which no path or bucket key can contain; "
            "give the directory your runs are written under (e.g. /data/rlaunch-artifacts)"
        )
    rest = prefix.split("://", 1)[1] if "://" in prefix else prefix
    if not rest.strip("/"):
        raise StorageError(
            f"{field}={prefix!r} is a filesystem root; rlaunch keeps outputs, .jobs and .tmp under the prefix, "
            "so give it a directory of its own (e.g. /data/rlaunch-artifacts)"
        )
    return prefix


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


Location = str | os.PathLike[str]


def utc_now() -> str:
    """Now, as an ISO-8601 UTC timestamp with milliseconds (the one clock format of every record)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")


def utc_from_epoch(seconds: float) -> str:
    """A Unix time (seconds) in the format of `utc_now`."""
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat(timespec="milliseconds")


def _local(url: Location) -> str | None:
    """The path of a plain path or `file://` URL exactly as fsspec's LocalFileSystem resolves it
    (posix), or None for anything else (other protocols, chained URLs, Windows paths)."""
    text = os.fspath(url)
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif "://" in text or "::" in text or text.startswith(("file:", "local:")) or os.sep != "/":
        return None
    if text.startswith("/"):
        path = text
    elif text.startswith("~"):
        path = os.path.expanduser(text)
    else:
        path = f"{os.getcwd()}/{'' if text == '.' else text.removeprefix('./')}"
    return path.rstrip("/") or "/"


def filesystem(url: Location) -> tuple[fsspec.AbstractFileSystem, str]:
    """The fsspec filesystem and path of `url` (imports fsspec: the local fast path does not call it)."""
    import fsspec.core

    text = os.fspath(url)
    try:
        fs, path = fsspec.core.url_to_fs(text)
    except ImportError as exc:
        raise StorageError(
            f"{text}: the fsspec filesystem for {text.split('://', 1)[0]!r} is not installed here ({exc}); "
            "install it where rlaunch runs, or use a local path"
        ) from None
    except ValueError as exc:
        raise StorageError(f"{text}: no fsspec filesystem can open it ({exc}); check the URL's scheme") from None
    return fs, path


def _is_local_fs(fs: fsspec.AbstractFileSystem) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def _route(url: Location) -> tuple[fsspec.AbstractFileSystem | None, str]:
    """(None, local path) for a plain path or `file://` URL (or a URL fsspec resolves to the local
    filesystem); (filesystem, path) for any other URL."""
    path = _local(url)
    if path is not None:
        return None, path
    fs, fpath = filesystem(url)
    return (None, fpath) if _is_local_fs(fs) else (fs, fpath)


def is_local(url: Location) -> bool:
    return _route(url)[0] is None


def local_path(url: Location) -> str:
    """The filesystem path of a local URL; raises for remote storage."""
    fs, path = _route(url)
    if fs is not None:
        raise ValueError(f"{os.fspath(url)} is not on the local filesystem")
    return path


def exists(url: Location) -> bool:
    fs, path = _route(url)
    return os.path.exists(path) if fs is None else fs.exists(path)


def read_bytes(url: Location) -> bytes:
    fs, path = _route(url)
    if fs is None:
        with open(path, "rb") as handle:
            return handle.read()
    data: bytes = fs.cat_file(path)
    return data


def read_text(url: Location) -> str:
    return read_bytes(url).decode("utf-8")


def read_json(url: Location) -> Any | None:
    """The parsed JSON at `url`, or None when the file does not exist (CorruptStateError, naming
    the file and the fix, when it exists but does not parse)."""
    from rlaunch.statefiles import parse_json

    try:
        data = read_bytes(url)
    except (FileNotFoundError, NotADirectoryError):  # a file where a directory should be: absent too
        return None
    return parse_json(data, os.fspath(url))


def dumps(obj: Any) -> bytes:
    """The one JSON encoding of records: indented, sorted keys, a final newline."""
    return (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def _fsynced_temporary(path: str, data: bytes) -> str:
    """A fully written, fsynced temporary file beside local `path` (its directory created): what an
    atomic write renames over `path` and an exclusive create links to it."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.tmp-{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return tmp


def write_bytes_atomic(url: Location, data: bytes) -> None:
    fs, path = _route(url)
    with _naming(url):
        if fs is not None:
            fs.pipe_file(path, data)
            return
        tmp = _fsynced_temporary(path, data)
        try:
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


@contextlib.contextmanager
def _naming(url: Location) -> Iterator[None]:
    """An OSError names the file being written when the OS did not (a write to a full disk names none)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(url)) from exc  # the errno's own subclass (PermissionError, ...)


def write_json_atomic(url: Location, obj: Any) -> None:
    write_bytes_atomic(url, dumps(obj))


def write_text_atomic(url: Location, text: str) -> None:
    write_bytes_atomic(url, text.encode("utf-8"))


def create_exclusive(url: Location, data: bytes) -> bool:
    """Write `data` at `url` only if nothing is there; False when it already existed.

    Local files get a real exclusive create (hard link of a fully written temporary file). Object
    stores without conditional puts get check-then-put, which is as strong as the store allows.
    """
    fs, path = _route(url)
    if fs is None:
        with _naming(url):
            tmp = _fsynced_temporary(path, data)
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


def remove(url: Location, recursive: bool = False) -> None:
    """Delete the file or (with `recursive`) the tree at `url`; nothing there is fine."""
    fs, path = _route(url)
    if fs is not None:
        if fs.exists(path):
            fs.rm(path, recursive=recursive)
        return
    if not os.path.lexists(path):
        return
    if os.path.isdir(path) and not os.path.islink(path):
        if not recursive:
            raise ValueError("Cannot delete directory, set recursive=True")  # fsspec's refusal
        if os.path.abspath(path) == os.getcwd():
            raise ValueError("Cannot delete current working directory")
        import shutil  # here: its compression imports cost more than every other local operation

        shutil.rmtree(path)
    else:
        os.remove(path)


def rename(src: Location, dst: Location) -> bool:
    """Move `src` to `dst`; False if `src` vanished first (someone else moved it)."""
    fs, spath = _route(src)
    if fs is None:
        try:
            os.rename(spath, local_path(dst))
            return True
        except FileNotFoundError:
            return False
    _, dpath = filesystem(dst)
    try:
        fs.mv(spath, dpath)
        return True
    except FileNotFoundError:
        return False


def list_names(url: Location) -> list[str]:
    """Base names of the entries directly under `url` (empty when it does not exist)."""
    fs, path = _route(url)
    if fs is None:
        if os.path.isfile(path):
            return [os.path.basename(path)]  # as fsspec's ls of a file
        try:
            return sorted(os.listdir(path))
        except (FileNotFoundError, NotADirectoryError):
            return []
    try:
        entries = fs.ls(path, detail=False)
    except FileNotFoundError:
        return []
    return sorted(os.path.basename(str(e).rstrip("/")) for e in entries)


def find(url: Location) -> list[str]:
    """Every file below `url`, as sorted paths relative to it (fsspec's `find`; empty when absent)."""
    fs, path = _route(url)
    if fs is None:
        if os.path.isfile(path):
            return [os.path.basename(path)]
        return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, files in os.walk(path) for f in files)
    root = path.rstrip("/")
    return sorted(p[len(root) + 1 :] if p.startswith(root + "/") else os.path.basename(p) for p in fs.find(path))


def get_file(url: Location, local: str) -> None:
    """Copy the file at `url` to the local path `local`: for local storage inside the kernel
    (`shutil.copyfile` uses sendfile on Linux), the bytes never copied through Python."""
    fs, path = _route(url)
    if fs is None:
        shutil.copyfile(path, local)
    else:
        fs.get_file(path, local)


def hashed(url: Location, *, chunk: int = 1 << 20) -> tuple[str, int]:
    """(sha256 hex, size) of the file at `url`, read once in chunks (a checkpoint's weights are large)."""
    import hashlib

    fs, path = _route(url)
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") if fs is None else fs.open(path, "rb") as source:
        for block in iter(lambda: source.read(chunk), b""):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


KERNEL_STEP = 32 << 20  # copied inside the kernel at a time, then hashed while still in the page cache
NO_SENDFILE_ERRNOS = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})


def copy_hashed(url: Location, local: str, *, chunk: int = 256 << 10) -> tuple[str, int]:
    """Copy the file at `url` to the local path `local`; returns (sha256 hex, size) of the bytes that
    landed. A local source is copied inside the kernel (sendfile) `KERNEL_STEP` at a time, each step
    hashed from the copy right after, while it is still in memory: the source is read once, the copy
    never from the disk, and it costs a quarter less CPU than passing the bytes through Python
    (benchmarks/README.md). Any other source (fsspec), or a filesystem the kernel cannot sendfile
    from, streams through a `chunk` buffer hashed as it passes: a chunk small enough to stay in the
    CPU's cache (8 MiB measured twice as slow as 256 KiB). Thread-friendly: sendfile, file I/O and
    hashlib release the GIL on large buffers, so several copies run in parallel."""
    import hashlib

    fs, path = _route(url)
    digest = hashlib.sha256()
    buffer = memoryview(bytearray(chunk))
    if fs is None:
        with open(path, "rb") as source, open(local, "w+b") as out:
            size = _sendfile_hashed(source.fileno(), out.fileno(), local, digest, buffer)
        if size is not None:
            return digest.hexdigest(), size
    size = 0
    with open(path, "rb") if fs is None else fs.open(path, "rb") as source, open(local, "wb") as out:
        while n := source.readinto(buffer):
            digest.update(buffer[:n])
            out.write(buffer[:n])
            size += n
    return digest.hexdigest(), size


def _sendfile_hashed(source: int, out: int, local: str, digest: hashlib._Hash, buffer: memoryview) -> int | None:
    """Bytes copied from `source` to `out` in the kernel, each step hashed from `out`; None when the
    kernel refuses sendfile before anything was copied (the caller streams instead)."""
    size = 0
    while True:
        try:
            sent = os.sendfile(out, source, size, KERNEL_STEP)
        except OSError as exc:
            if size == 0 and exc.errno in NO_SENDFILE_ERRNOS:
                return None
            raise
        if not sent:
            return size
        end = size + sent
        while size < end:
            n = os.preadv(out, [buffer], size)  # the copy ends at `end`: no read past it
            if not n:
                raise OSError(errno.EIO, "the staged copy shrank while it was being hashed", local)
            digest.update(buffer[:n])
            size += n


READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def cannot_write(exc: OSError) -> bool:
    """Whether a write failed because the location is read-only to this user (a shared bucket mounted
    for readers) or full: a read-only view goes on with what it reconciled in memory."""
    return isinstance(exc, PermissionError) or exc.errno in READ_ONLY_ERRNOS or exc.errno in FULL_ERRNOS


def is_disk_full(exc: BaseException) -> bool:
    """Whether a write failed because its filesystem is full or the user's quota is spent."""
    return isinstance(exc, OSError) and exc.errno in FULL_ERRNOS


def disk_full_message(exc: OSError) -> str:
    """One line for a write that did not fit: the errno's name, the path and what to do next."""
    name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    where = exc.filename or "a file whose path the system did not give"
    return (
        f"{exc.strerror or 'no space left on device'} ({name}) writing {where}: free space on that filesystem "
        f'(or use another prefix) and run again; a failed RL attempt resubmits with --retry "disk full"'
    )


def fullest(urls: list[str]) -> str | None:
    """Of the local locations `urls`, the one whose filesystem has the least space free: where a
    write that failed without naming its file (a trainer's bare ENOSPC) most likely went."""
    free: list[tuple[int, str]] = []
    for url in urls:
        if not url or not is_local(url):
            continue
        path = local_path(url)
        existing = path
        while not os.path.exists(existing) and os.path.dirname(existing) != existing:
            existing = os.path.dirname(existing)
        try:
            stats = os.statvfs(existing)
        except OSError:
            continue
        free.append((stats.f_bavail * stats.f_frsize, path))
    return min(free)[1] if free else None


def writable_problem(url: str) -> str | None:
    """Why nothing can be written under `url` (None: it can).

    Checked by the judgement before anything is submitted, so a read-only prefix fails in seconds,
    not after a coordinator was queued. A local path writes nothing to find out (a dry run and a
    refused `--run` leave no trace): its nearest existing ancestor must be a directory this process
    may write (a read-only mount says no even to root). Elsewhere a probe file is written and removed."""
    if is_local(url):
        path = os.path.abspath(local_path(url))
        while not os.path.lexists(path):
            path = os.path.dirname(path)
        if not os.path.isdir(path):
            return f"{url} is not writable ({path} is not a directory); choose a writable {PREFIX_ENV}"
        if not os.access(path, os.W_OK | os.X_OK):
            return f"{url} is not writable ({path} may not be written); choose a writable {PREFIX_ENV} or fix its permissions"
        return None
    probe = join(url, f".rlaunch-write-probe-{uuid.uuid4().hex[:12]}")
    try:
        write_bytes_atomic(probe, b"")
        remove(probe)
    except OSError as exc:
        return f"{url} is not writable ({exc.strerror or exc}); choose a writable {PREFIX_ENV} or fix its permissions"
    return None
