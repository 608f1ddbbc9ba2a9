"""One lab per test session: real marker launches in every state the observe commands must read.

The finished runs are launched together (they are independent artifacts) and shared by the
tests that only read them; tests that act on a run (cancel) launch their own. Teardown stops
anything still running and fails the session if it had to.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support.polling import wait_for

from .lab import Lab

RL = "marker/rl"
LAUNCH_TIMEOUT = 180


@dataclass(frozen=True)
class Runs:
    """Versions of `marker/rl` launched to the end, one per scenario."""

    ok: str = "2026.11.01"
    fail_at_3: str = "2026.11.02"
    no_steps: str = "2026.11.03"
    wrong_model: str = "2026.11.04"
    never_joined: str = "2026.11.05"


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    lab = Lab(tmp_path_factory.mktemp("observe-lab"))
    yield lab
    left = lab.stop_everything()
    assert not left, f"left running after the tests: {left}"


def _sabotage_replica_1(lab: Lab, version: str) -> str:
    """Break node 1's staging directory the moment the attempt is known, before its task starts.

    The task bootstrap stages into `$RLAUNCH_STAGING_ROOT/<run>/<attempt>/replica-<rank>`; a file
    in place of rank 1's directory makes that replica fail before it can join (a real failure
    mode: a node whose local disk is broken). The attempt id is in the run record, which the
    coordinator writes before it starts the launch host, seconds before the child gang exists.
    """
    # a multi-node launch records its --skip-smoke-gate before submitting: wait for the attempt itself
    attempts = wait_for(lambda: (lab.run_record(RL, version) or {}).get("attempts"), 60, "the never-joined attempt")
    attempt = attempts[-1]["attempt_id"]
    blocked = lab.staging / f"marker-rl-{version}" / attempt / "replica-1"
    blocked.parent.mkdir(parents=True, exist_ok=True)
    blocked.write_text("not a directory: this node's staging disk is broken\n")
    assert "replica-1.json" not in lab.joined(RL, version, attempt), (
        "replica 1 joined before the test could break its node"
    )
    return attempt


@pytest.fixture(scope="session")
def runs(lab: Lab) -> Runs:
    versions = Runs()
    launches: list[tuple[str, subprocess.Popen[str]]] = [
        (versions.ok, lab.marker(versions.ok, "ok")),
        (versions.fail_at_3, lab.marker(versions.fail_at_3, "fail_at_3")),
        (versions.no_steps, lab.marker(versions.no_steps, "no_steps")),
        (versions.wrong_model, lab.marker(versions.wrong_model, "wrong_model")),
    ]
    detached = lab.marker(versions.never_joined, "ok", replicas=2, detach=True)
    attempt = _sabotage_replica_1(lab, versions.never_joined)
    assert detached.wait(LAUNCH_TIMEOUT) == 0, lab.launch_log("tests.experiments.marker", versions.never_joined)
    for _version, process in launches:
        process.wait(LAUNCH_TIMEOUT)
    wait_for(
        lambda: (
            ((lab.run_record(RL, versions.never_joined) or {}).get("attempts") or [{}])[-1].get("state")
            in ("failed", "succeeded")
        ),
        LAUNCH_TIMEOUT,
        "the never-joined run to end",
    )
    assert "replica-1.json" not in lab.joined(RL, versions.never_joined, attempt)
    return versions
