"""Stage an artifact directory to a task-local path, verifying what was copied.

The source artifact's record must carry the identity (name@version and fingerprint) the launch
document expects. Files are copied several at a time (`COPIES_IN_FLIGHT`; sendfile and hashlib
release the GIL, so the copies spread over the cores): each one the record lists a checksum for
is hashed by sha256 as it is copied (`storage.copy_hashed`: the bytes that landed, read once from
memory), any other copied inside the kernel unhashed, and every checksum the record lists is
verified before anything is renamed into place. The copy lands in a temporary directory beside
the target; a failure stops the copies still in flight, waits for them, and removes that
directory, so a half-staged input is never used or left behind. An already staged, matching
input is reused. Staging writes and deletes only inside the task's root (`rlaunch.paths`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Any

from rlaunch import storage
from rlaunch.artifacts import records
from rlaunch.errors import UserError
from rlaunch.paths import inside, remove_inside

MANIFEST = ".rlaunch-staged.json"
COPIES_IN_FLIGHT = 8  # enough to keep a local disk or an object store's connections busy


class StagingError(UserError, RuntimeError):
    pass


def verify_identity(uri: str, identity: str) -> dict[str, Any]:
    record = records.find_record(uri)
    if record is None:
        raise StagingError(f"{uri} has no artifact record; it is not the artifact {identity}")
    expected_name, _, fingerprint = identity.partition(":")
    actual = f"{record.get('name')}@{record.get('version')}"
    if actual != expected_name or (fingerprint and record.get("fingerprint") != fingerprint):
        raise StagingError(
            f"{uri} holds {actual}:{str(record.get('fingerprint'))[:12]} but the launch document expects {identity[:80]}; "
            "the input changed since the document was rendered"
        )
    return record


def stage(uri: str, identity: str, target: str, progress: Callable[[str], None], *, root: str) -> str:
    """Copy the artifact directory at `uri` to local `target` inside `root`; returns `target`.

    `target` must resolve strictly inside `root` (checked before anything is written or deleted):
    staging replaces `target`, and nothing outside the task's root is ever replaced.
    """
    inside(root, target)
    record = verify_identity(uri, identity)
    expected = (record.get("result") or {}).get("files") or {}
    manifest_path = os.path.join(target, MANIFEST)
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as handle:
            if json.load(handle).get("identity") == identity:
                progress(f"staging {identity.split(':')[0]}: already staged at {target}")
                return target
    files = [rel for rel in storage.find(uri) if not os.path.basename(rel).startswith(".")]
    if not files:
        raise StagingError(f"{uri} holds no files to stage")
    tmp = f"{target}.staging-{uuid.uuid4().hex[:8]}"
    os.makedirs(tmp)
    name = identity.split(":")[0]
    try:
        total = _copy_all(uri, files, tmp, expected, lambda i, size: _say(progress, name, i, len(files), size))
        missing = sorted(set(expected) - set(files))
        if missing:
            raise StagingError(f"{uri} lacks files its artifact record lists: {missing}")
        with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as handle:
            json.dump({"uri": uri, "identity": identity, "files": len(files), "bytes": total}, handle)
        remove_inside(root, target)  # its parent exists: the temporary copy was made beside it
        os.rename(tmp, target)
    finally:
        remove_inside(root, tmp)
    checked = f", {len(expected)} checksum(s) verified" if expected else ""
    progress(f"staged {name} -> {target}{checked}")
    return target


def _say(progress: Callable[[str], None], name: str, done: int, count: int, size: int) -> None:
    if done == count or done % 20 == 0:
        progress(f"staging {name}: {done}/{count} files, {size / 1e6:.1f} MB")


def _copy_all(
    uri: str, files: list[str], tmp: str, expected: dict[str, str], copied: Callable[[int, int], None]
) -> int:
    """Copy `files` of `uri` into `tmp`, several in flight, each checked against `expected` as it lands;
    returns the bytes copied. The first failure cancels the copies not started and waits for the
    running ones, so nothing writes into `tmp` once this returns or raises."""

    def one(rel: str) -> tuple[str, str | None, int]:
        """A file the record lists is hashed as it is copied; any other is copied inside the kernel
        (sendfile), unhashed: hashing is what makes staging slower than `cp`."""
        source, local = storage.join(uri, rel), os.path.join(tmp, rel)
        os.makedirs(os.path.dirname(local), exist_ok=True)
        if rel not in expected:
            storage.get_file(source, local)
            return rel, None, os.path.getsize(local)
        digest, size = storage.copy_hashed(source, local)
        return rel, digest, size

    total = done = 0
    with ThreadPoolExecutor(min(COPIES_IN_FLIGHT, len(files)), thread_name_prefix="rlaunch-stage") as pool:
        pending = {pool.submit(one, rel) for rel in files}
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in finished:
                    rel, digest, size = future.result()
                    if rel in expected and digest != expected[rel]:
                        raise StagingError(f"{uri}/{rel} does not match the sha256 its artifact record lists")
                    total, done = total + size, done + 1
                    copied(done, total)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return total
