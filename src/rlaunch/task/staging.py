"""Stage an artifact directory to a task-local path, verifying what was copied.

The source artifact's record must carry the identity (name@version and fingerprint) the launch
document expects, every file is copied through fsspec and, when the record lists checksums,
verified by sha256. The copy lands in a temporary directory and is renamed into place, so a
half-staged input is never used; an already staged, matching input is reused. Staging writes and
deletes only inside the task's root (`rlaunch.paths`).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable

from rlaunch import storage
from rlaunch.artifacts import records
from rlaunch.errors import UserError
from rlaunch.paths import inside, remove_inside

MANIFEST = ".rlaunch-staged.json"


class StagingError(UserError, RuntimeError):
    pass


def verify_identity(uri: str, identity: str) -> dict:
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


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


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
    total = 0
    try:
        for i, rel in enumerate(files, 1):
            local = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(local), exist_ok=True)
            storage.get_file(storage.join(uri, rel), local)
            total += os.path.getsize(local)
            if rel in expected and sha256_file(local) != expected[rel]:
                raise StagingError(f"{uri}/{rel} does not match the sha256 its artifact record lists")
            if i == len(files) or i % 20 == 0:
                progress(f"staging {identity.split(':')[0]}: {i}/{len(files)} files, {total / 1e6:.1f} MB")
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
    progress(f"staged {identity.split(':')[0]} -> {target}{checked}")
    return target
