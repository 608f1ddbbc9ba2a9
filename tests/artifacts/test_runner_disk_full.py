"""A step that fails on a full disk under the prefix is told by its errno, path and next step, and
the failed status that no longer fits is told after it, never instead of it (the submitter's last
word was once the raw `OSError: [Errno 28] ... .status.json` of that status, the step's own failure
lost). The prefix is a real small tmpfs (tests/support/faults.py), filled by the step as a trainer saving a
checkpoint fills it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from rlaunch.artifacts import RunFailedError, Runner
from tests.support.faults import fill, small_tmpfs

from .helpers import DAY, make_step, quiet


def test_a_step_failing_on_a_full_prefix_is_told_as_a_full_disk_and_not_as_its_unwritten_status(
    tmp_path: Path,
) -> None:
    with small_tmpfs(tmp_path / "prefix", "256k") as prefix:
        checkpoint = prefix / "checkpoint.bin"

        def save_a_checkpoint(config: Any) -> Any:
            fill(prefix)
            with open(checkpoint, "wb") as handle:
                handle.write(b"w" * 65536)  # the write that does not fit: a bare ENOSPC, as a trainer's
                os.fsync(handle.fileno())
            raise AssertionError("unreachable: the disk is full")

        messages: list[str] = []
        with pytest.raises(RunFailedError) as failed:
            Runner(str(prefix), report=quiet(messages)).run([make_step("ckpt", run=save_a_checkpoint)])
        (outcome,) = failed.value.failed
        status = prefix / "ckpt" / DAY / ".status.json"
        assert outcome.error == (
            "No space left on device (ENOSPC) writing a file whose path the system did not give: free space on that filesystem (or use another "
            'prefix) and run again; a failed RL attempt resubmits with --retry "disk full"; its failed status did '
            f"not fit either (No space left on device writing {status})"
        )
        assert f"  FAILED ckpt@{DAY}: {outcome.error}" in messages
        assert not any("this is a bug" in m for m in messages), messages  # a full disk is no bug: no traceback
