"""`RayNode.start` against a scripted `ray start`: Ray's own give-up while its raylet registers with
the GCS (a fixed 30 s in Ray) is tried once more; any other failure, and a second give-up, fail
the rank with Ray's last lines. The script stands in for the runtime's interpreter, so the node's
real keeper, process group and sweep run around it.
"""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from rlaunch.task.ray_node import REGISTRATION_TIMED_OUT, STARTED_LINE, NodeSpec, RayNode, RayNodeError

SPEC = NodeSpec(
    rank=1, node_ip="127.0.0.1", cpus=1, gpus=0, memory_bytes=1024**3, port=6379, head_address="127.0.0.1:6379"
)


def _interpreter(tmp_path: Path, outcomes: list[str]) -> str:
    """A stand-in for `python -m ray.scripts.scripts start --block`: its n-th run plays outcomes[n]
    ("timeout": Ray's give-up; "refused": another failure; "up": Ray starts and blocks)."""
    script = tmp_path / "python"
    script.write_text(
        f"""#!{sys.executable}
import pathlib, sys, time
runs = pathlib.Path({str(tmp_path / "runs")!r})
n = len(runs.read_text()) if runs.exists() else 0
runs.write_text("x" * (n + 1))
outcome = {outcomes!r}[n]
if outcome == "timeout":
    print("Exception: {REGISTRATION_TIMED_OUT}. This could happen because ...", flush=True)
    sys.exit(1)
if outcome == "refused":
    print("ConnectionError: could not reach the GCS at 127.0.0.1:6379", flush=True)
    sys.exit(1)
print("{STARTED_LINE}.", flush=True)
time.sleep(300)
"""
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


def _runs(tmp_path: Path) -> int:
    return len((tmp_path / "runs").read_text())


def test_a_registration_that_ray_gave_up_on_is_started_once_more(tmp_path: Path) -> None:
    said: list[str] = []
    node = RayNode(SPEC, _interpreter(tmp_path, ["timeout", "up"]), {}, said.append)
    try:
        assert node.start(timeout=30).alive
        assert _runs(tmp_path) == 2
        assert any("starting the node again (try 2 of 2)" in line for line in said), said
    finally:
        node.stop()
        node.remove_temp_dir()


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [(["timeout", "timeout", "up"], REGISTRATION_TIMED_OUT), (["refused", "up"], "could not reach the GCS")],
    ids=["given-up-twice", "another-failure"],
)
def test_a_second_give_up_or_any_other_failure_fails_the_rank(
    tmp_path: Path, outcomes: list[str], expected: str
) -> None:
    node = RayNode(SPEC, _interpreter(tmp_path, outcomes), {}, lambda line: None)
    try:
        with pytest.raises(RayNodeError, match="exited 1 before Ray was up") as failed:
            node.start(timeout=30)
        assert expected in str(failed.value)
        assert _runs(tmp_path) == len(outcomes) - 1
    finally:
        node.stop()
        node.remove_temp_dir()
