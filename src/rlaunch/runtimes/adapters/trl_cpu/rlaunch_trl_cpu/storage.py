"""Files the trainer writes, on a local path or any fsspec URL.

A location is a local path, or a URL with a scheme (`file://`, `memory://`, `gs://`, ...), which
always goes through fsspec. Writes are atomic: a local file is written under a temporary name and
renamed; a URL gets one put of the whole content. Directories are published by copying files
(staged locally first).

Records written here (rank 0 unless said otherwise):

* `{attempt}/joined/trainer-rank-<r>.json` - every process: `{rank, world_size, host, pid, time}`
* `{attempt}/model_load.json`              - what model the trainer actually loaded
* `{attempt}/metrics.jsonl`                - one JSON line per optimizer step
* `{attempt}/eval.jsonl`                   - one JSON line per evaluation on data.val_data
                                             (step 0 = before training)
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time
import uuid
from collections.abc import Iterable
from typing import Any


def is_url(location: str) -> bool:
    return "://" in location


def join(base: str, *parts: str) -> str:
    if is_url(base):
        head = base.rstrip("/")
        tail = "/".join(p.strip("/") for p in parts if p and p.strip("/"))
        return f"{head}/{tail}" if tail else head
    return os.path.join(os.path.expanduser(base), *parts)


def _fs(url: str):
    import fsspec

    return fsspec.core.url_to_fs(url)


def exists(location: str) -> bool:
    if is_url(location):
        fs, path = _fs(location)
        return fs.exists(path)
    return os.path.exists(location)


def read_bytes(location: str) -> bytes:
    if is_url(location):
        fs, path = _fs(location)
        return fs.cat_file(path)
    with open(location, "rb") as handle:
        return handle.read()


def read_text(location: str) -> str:
    return read_bytes(location).decode("utf-8")


def read_json(location: str) -> Any:
    return json.loads(read_bytes(location))


def write_bytes_atomic(location: str, data: bytes) -> None:
    if is_url(location):
        fs, path = _fs(location)
        parent = path.rsplit("/", 1)[0]
        if parent:
            fs.makedirs(parent, exist_ok=True)
        fs.pipe_file(path, data)
        return
    directory = os.path.dirname(os.path.abspath(location))
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(location)}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, location)


def write_json_atomic(location: str, value: Any) -> None:
    write_bytes_atomic(location, (json.dumps(value, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def list_names(location: str) -> list[str]:
    """Names directly under a directory (empty if it does not exist)."""
    if is_url(location):
        fs, path = _fs(location)
        if not fs.exists(path):
            return []
        return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(path, detail=False))
    if not os.path.isdir(location):
        return []
    return sorted(os.listdir(location))


def remove_tree(location: str) -> None:
    if is_url(location):
        fs, path = _fs(location)
        if fs.exists(path):
            fs.rm(path, recursive=True)
        return
    import shutil

    shutil.rmtree(location, ignore_errors=True)


def _local_files(directory: str) -> list[str]:
    out = []
    for root, _dirs, files in os.walk(directory):
        for name in files:
            out.append(os.path.relpath(os.path.join(root, name), directory))
    return sorted(out)


def publish_dir(local_dir: str, destination: str, *, last: Iterable[str] = ()) -> None:
    """Copy a local directory to `destination` so that a reader never sees it half-written.

    Local destination: copy to a temporary sibling, then rename into place (replacing an older
    copy). URL destination: put file by file, the names in `last` after everything else, so a
    completion file written last marks the copy complete.
    """
    last = list(last)
    if not is_url(destination):
        import shutil

        destination = os.path.expanduser(destination)
        parent = os.path.dirname(os.path.abspath(destination))
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f".{os.path.basename(destination)}.{uuid.uuid4().hex}.tmp")
        shutil.copytree(local_dir, tmp)
        if os.path.exists(destination):
            shutil.rmtree(destination)
        os.replace(tmp, destination)
        return
    fs, root = _fs(destination)
    root = root.rstrip("/")
    files = _local_files(local_dir)
    ordered = [f for f in files if f not in last] + [f for f in last if f in files]
    for rel in ordered:
        target = f"{root}/{rel.replace(os.sep, '/')}"
        fs.makedirs(target.rsplit("/", 1)[0], exist_ok=True)
        fs.put_file(os.path.join(local_dir, rel), target)


def fetch_dir(location: str, local_dir: str) -> str:
    """A local directory holding the files of `location` (downloaded for a URL)."""
    if not is_url(location):
        return os.path.expanduser(location)
    import shutil

    fs, root = _fs(location)
    root = root.rstrip("/")
    shutil.rmtree(local_dir, ignore_errors=True)
    os.makedirs(local_dir)
    for path in fs.find(root):
        rel = path[len(root) :].lstrip("/")
        target = os.path.join(local_dir, *rel.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fs.get_file(path, target)
    return local_dir


def sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def weight_files(directory: str) -> list[str]:
    """A saved model's weight files: its safetensors, else its `pytorch_model*.bin`."""
    names = sorted(os.listdir(directory))
    safetensors = [n for n in names if n.endswith(".safetensors")]
    return safetensors or [n for n in names if n.endswith(".bin") and n.startswith("pytorch_model")]


def weight_digests(directory: str) -> dict[str, str]:
    """weight file name -> its sha256: what a model-load record and an evaluation report name."""
    return {name: sha256_file(os.path.join(directory, name)) for name in weight_files(directory)}


# ---------------------------------------------------------------- records


def write_join_marker(attempt_dir: str, rank: int, world_size: int) -> str:
    location = join(attempt_dir, "joined", f"trainer-rank-{rank}.json")
    write_json_atomic(
        location,
        {"rank": rank, "world_size": world_size, "host": socket.gethostname(), "pid": os.getpid(), "time": time.time()},
    )
    return location


class MetricsWriter:
    """Appends one JSON line per optimizer step to `{attempt}/metrics.jsonl` (or `name`).

    Local file: appended and flushed per line. URL: the whole file is rewritten per line (one
    put). Steps must be strictly increasing; on start, lines already present with a step beyond
    `resume_step` (from an attempt that died after logging but before checkpointing) are
    dropped, so the file always describes the trajectory of the model being trained.
    """

    def __init__(self, attempt_dir: str, *, resume_step: int = 0, name: str = "metrics.jsonl") -> None:
        self.location = join(attempt_dir, name)
        self._lines: list[str] = []
        self.last_step = -1
        if exists(self.location):
            kept = []
            for line in read_text(self.location).splitlines():
                if not line.strip():
                    continue
                try:
                    step = int(json.loads(line)["step"])
                except (ValueError, KeyError, TypeError):
                    continue
                if step <= resume_step and step > self.last_step:
                    kept.append(line)
                    self.last_step = step
            self._lines = kept
            write_bytes_atomic(self.location, "".join(f"{ln}\n" for ln in kept).encode("utf-8"))

    def write(self, record: dict[str, Any]) -> bool:
        step = int(record["step"])
        if step <= self.last_step:
            return False
        line = json.dumps(record, sort_keys=True, allow_nan=True)
        self._lines.append(line)
        self.last_step = step
        if is_url(self.location):
            write_bytes_atomic(self.location, "".join(f"{ln}\n" for ln in self._lines).encode("utf-8"))
        else:
            os.makedirs(os.path.dirname(os.path.abspath(self.location)), exist_ok=True)
            with open(self.location, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
                handle.flush()
                os.fsync(handle.fileno())
        return True
