"""A full disk during a run is named, classed and survived.

The scratch volume ($RLAUNCH_TEMP_PREFIX: checkpoints and attempt directories) is a small tmpfs;
the trainer fills it writing a checkpoint (ENOSPC), as a real trainer saving weights would. The
run record, `rlaunch status` and the submitter's last line must each name ENOSPC and the full
path, with the next step; no traceback of rlaunch's (the launcher's, or one from a background
thread) reaches the user, and nothing claims the run is still running.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.faults import small_tmpfs
from tests.support.launchers import Launcher, checkout_launcher

pytestmark = pytest.mark.launch

VERSION = "2026.12.04"
RUN = f"marker/rl@{VERSION}"
MARKER = ("-m", "tests.experiments.marker", "--version", VERSION, "--steps", "4")


@pytest.fixture
def scratch_launcher(tmp_path: Path) -> Iterator[tuple[Launcher, Path]]:
    with small_tmpfs(tmp_path / "scratch", "2m") as scratch:
        launcher = Launcher(tmp_path / "prefix", {"RLAUNCH_TEMP_PREFIX": str(scratch)})
        yield launcher, scratch
        jobs = launcher.prefix / ".jobs"
        if jobs.exists():
            backend = launcher.backend()
            for job in backend.list_jobs():
                if not job.state.terminal:
                    backend.cancel(job.job_id, reason="test teardown")


def _names_enospc_and(text: str, scratch: Path) -> bool:
    return "ENOSPC" in text and str(scratch) in text


def test_a_full_scratch_disk_is_named_in_the_record_status_and_the_submitters_last_line(
    scratch_launcher: tuple[Launcher, Path],
) -> None:
    launcher, scratch = scratch_launcher
    done = launcher.run(*MARKER, "--scenario", "fill_disk_at_2", "--run", timeout=240)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    # the trainer's own traceback is its log, streamed as it is; none of rlaunch's reaches the user
    assert "src/rlaunch/" not in output and "Exception in thread" not in output, output[-3000:]
    assert "this is a bug" not in output, output[-3000:]
    last = done.stderr.strip().splitlines()[-1]
    assert _names_enospc_and(last, scratch), last
    assert "--retry" in last, last  # the next step

    record = json.loads((launcher.prefix / "marker" / "rl" / VERSION / "run_record.json").read_text())
    attempt = record["attempts"][-1]
    assert attempt["state"] == "failed", attempt
    failure_class = attempt["failure_class"]
    assert failure_class["kind"] == "operational" and failure_class["cause"] == "disk full", failure_class
    assert str(scratch) in failure_class["where"], failure_class
    assert _names_enospc_and(attempt["failure"] + failure_class["evidence"] + failure_class["where"], scratch)
    # the text and the class name one path: the first write that did not fit and named its file
    assert failure_class["where"].endswith("/gang/outcome.json"), failure_class
    assert f"writing {failure_class['where']}" in attempt["failure"], attempt["failure"]
    assert attempt["failure"].count(f"writing {scratch}") == 1, attempt["failure"]

    shown = launcher.run("-m", "rlaunch", "status", RUN, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "disk full" in shown.stdout and str(scratch) in shown.stdout, shown.stdout
    assert "free space" in shown.stdout, shown.stdout  # the next step
    # step 2's save was cut short: its weights without its manifest are not a kept checkpoint
    assert "checkpoints  kept [none], incomplete [2] (no rlaunch_checkpoint.json)" in shown.stdout, shown.stdout


def test_a_full_disk_under_the_prefix_is_told_and_classified_although_nothing_can_be_recorded(tmp_path: Path) -> None:
    """The prefix itself (records, checkpoints, the jobs' state) is the small tmpfs, and staging lies
    elsewhere, so nothing frees space: the host, the runner and the supervisors cannot record the
    failure. The submitter still tells a full disk (no raw OSError, no traceback of rlaunch's), and
    `rlaunch status` classifies it from the jobs' logs instead of calling it unclassified."""
    with small_tmpfs(tmp_path / "prefix", "4m") as prefix:
        launcher = checkout_launcher(prefix, {"RLAUNCH_STAGING_ROOT": str(tmp_path / "staging")})
        try:
            done = launcher.run(*MARKER, "--scenario", "fill_disk_at_2", "--run", timeout=240)
            output = done.stdout + done.stderr
            assert done.returncode != 0, output[-3000:]
            assert "[Errno 28] No space left on device: '" not in output, output[-3000:]  # the trainer's own is bare
            assert "src/rlaunch/" not in output and "this is a bug" not in output, output[-3000:]
            (told,) = [line for line in done.stdout.splitlines() if line.startswith("  FAILED marker/rl@")]
            assert f"No space left on device (ENOSPC) writing {prefix}/" in told and '--retry "disk full"' in told

            shown = launcher.run("-m", "rlaunch", "status", RUN, timeout=60)
            assert shown.returncode == 0, shown.stderr
            assert "failed as    operational: disk full; free space" in shown.stdout, shown.stdout
            assert "unclassified" not in shown.stdout, shown.stdout
            found = json.loads(launcher.run("-m", "rlaunch", "status", RUN, "--json", timeout=60).stdout)[
                "failure_class"
            ]
            assert (found["kind"], found["cause"]) == ("operational", "disk full"), found
            assert found["where"].startswith(f"{prefix}/") and "ENOSPC" in found["evidence"], found
        finally:
            backend = launcher.backend()
            for job in backend.list_jobs():
                if not job.state.terminal:
                    backend.cancel(job.job_id, reason="test teardown")
